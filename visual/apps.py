from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core import checks


class VisualConfig(AppConfig):
    name = "visual"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from accounts.services import account_deactivated, api_key_revoked
        from visual.signals import end_sessions_of_account, end_sessions_of_key

        api_key_revoked.connect(end_sessions_of_key, dispatch_uid="visual-end-sessions-of-key")
        account_deactivated.connect(end_sessions_of_account, dispatch_uid="visual-end-sessions-of-account")
        checks.register(check_visual_settings)


def check_visual_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    errors: list[checks.CheckMessage] = []
    if not 1 <= settings.RAM_VISUAL_MAX_FPS <= 10:
        errors.append(checks.Error("RAM_VISUAL_MAX_FPS must be an integer from 1 to 10.", id="visual.E001"))
    if settings.RAM_VISUAL_MAX_SOCKETS < 1 or settings.RAM_VISUAL_MAX_PENDING_TICKETS < 1:
        errors.append(
            checks.Error(
                "RAM_VISUAL_MAX_SOCKETS and RAM_VISUAL_MAX_PENDING_TICKETS must be positive.", id="visual.E002"
            )
        )
    for per_account, ceiling in (
        ("RAM_VISUAL_MAX_SOCKETS_PER_ACCOUNT", "RAM_VISUAL_MAX_SOCKETS"),
        ("RAM_VISUAL_MAX_PENDING_TICKETS_PER_ACCOUNT", "RAM_VISUAL_MAX_PENDING_TICKETS"),
    ):
        value, limit = getattr(settings, per_account), getattr(settings, ceiling)
        if not 1 <= value < limit:
            errors.append(
                checks.Error(
                    f"{per_account} must be at least 1 and below {ceiling} ({limit}): "
                    "one account must never hold all of the gateway.",
                    id="visual.E003",
                )
            )
    return errors
