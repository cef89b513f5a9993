from django.apps import AppConfig
from django.contrib.admin import apps as admin_apps


class RamsiteConfig(AppConfig):
    name = "ramsite"
    default = True


class RamAdminConfig(admin_apps.AdminConfig):
    """Django's admin, with a site that admits staff with a password session only."""

    default = False
    default_site = "ramsite.admin_site.RamAdminSite"
