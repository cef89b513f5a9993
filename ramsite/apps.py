from django.apps import AppConfig
from django.contrib.admin import apps as admin_apps
from django.core import checks


class RamsiteConfig(AppConfig):
    name = "ramsite"
    default = True

    def ready(self) -> None:
        from ramsite.checks import check_public_origin

        checks.register(check_public_origin, checks.Tags.security, deploy=True)


class RamAdminConfig(admin_apps.AdminConfig):
    """Django's admin, with a site that admits staff with a password session only."""

    default = False
    default_site = "ramsite.admin_site.RamAdminSite"
