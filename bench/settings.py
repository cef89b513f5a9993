"""The project's settings with the bench's URLs (``bench.urls``): the api table's floor endpoint."""

from ramsite.settings import *  # noqa: F403

ROOT_URLCONF = "bench.urls"
