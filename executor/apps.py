from django.apps import AppConfig


class ExecutorConfig(AppConfig):
    name = "executor"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from executor import signals  # noqa: F401 - connects the receivers
        from executor.inprocess import InProcessServerLink
        from executor.server_link import register_in_process

        # An executor started inside a server process (tests, benchmarks) calls the services directly.
        register_in_process(InProcessServerLink)
