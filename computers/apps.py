from django.apps import AppConfig


class ComputersConfig(AppConfig):
    default = True  # "computers" in INSTALLED_APPS; the other configuration below is named in full
    name = "computers"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from computers import signals  # noqa: F401 - connects the receivers
        from computers.inprocess import InProcessServerLink
        from executor.server_link import register_in_process

        # An executor started inside a server process (tests, benchmarks) calls the services directly.
        register_in_process(InProcessServerLink)


class ExecutorHistoryConfig(AppConfig):
    """The ``executor`` app label, kept for two things only: the migration history of the tables
    ``computers`` now owns (``computers/executor_migrations/``, through ``MIGRATION_MODULES``: a
    database migrated before the move keeps its applied rows), and the discovery of the browser
    process's command ``manage.py run_executor`` (``executor/management/commands/``). The
    ``executor`` package itself holds no app configuration, no model and no migration."""

    name = "executor"
    label = "executor"
    verbose_name = "Executor (browser process)"
    default_auto_field = "django.db.models.BigAutoField"
