"""The migration history of the ``executor`` app label (``MIGRATION_MODULES`` in ramsite/settings.py).

These migrations created the tables of computers and artifacts before their models moved to the
``computers`` app (``0011_models_moved_to_computers``); they stay so that a database migrated before
the move keeps its applied history, and a new one is built the same way."""
