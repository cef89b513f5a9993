from django.apps import AppConfig


class ExecutorConfig(AppConfig):
    name = "executor"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from executor import signals  # noqa: F401 - connects the receivers
