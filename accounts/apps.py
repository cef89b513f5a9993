from django.apps import AppConfig
from django.contrib.admin import apps as admin_apps


class AccountsConfig(AppConfig):
    name = "accounts"
    default_auto_field = "django.db.models.BigAutoField"
    default = True


class RamAdminConfig(admin_apps.AdminConfig):
    """Django's admin, with a site that admits staff with a password session only."""

    default = False
    default_site = "accounts.admin_site.RamAdminSite"
