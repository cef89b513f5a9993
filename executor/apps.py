from django.apps import AppConfig


class ExecutorConfig(AppConfig):
    name = "executor"
    default_auto_field = "django.db.models.BigAutoField"
