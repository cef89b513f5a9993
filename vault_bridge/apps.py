from django.apps import AppConfig


class VaultBridgeConfig(AppConfig):
    name = "vault_bridge"
    default_auto_field = "django.db.models.BigAutoField"
