from django.apps import AppConfig


class VisualConfig(AppConfig):
    name = "visual"
    default_auto_field = "django.db.models.BigAutoField"
