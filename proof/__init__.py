"""``make proof``: RAM's promises under faults, load and hostile input; see proof/__main__.py."""
