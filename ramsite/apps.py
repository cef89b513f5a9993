from django.apps import AppConfig
from django.core import checks


class RamsiteConfig(AppConfig):
    name = "ramsite"
    default = True

    def ready(self) -> None:
        from ramsite.checks import (
            check_profile_store_keys,
            check_public_origin,
            check_web_workers,
            check_webhook_secret_keys,
        )

        checks.register(check_public_origin, checks.Tags.security, deploy=True)
        checks.register(check_webhook_secret_keys, checks.Tags.security, deploy=True)
        checks.register(check_profile_store_keys, checks.Tags.security, deploy=True)
        checks.register(check_web_workers, checks.Tags.security)
