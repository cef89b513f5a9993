from django.apps import AppConfig


class VisualConfig(AppConfig):
    name = "visual"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from accounts.services import api_key_revoked
        from visual.signals import end_sessions_of_key

        api_key_revoked.connect(end_sessions_of_key, dispatch_uid="visual-end-sessions-of-key")
