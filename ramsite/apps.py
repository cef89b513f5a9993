from django.apps import AppConfig


class RamsiteConfig(AppConfig):
    name = "ramsite"
