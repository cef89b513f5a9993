"""RAM server project package: settings, ASGI entry point, Celery app, root URLs."""

from ramsite.celery import app as celery_app

__all__ = ["celery_app"]
