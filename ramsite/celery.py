"""The Celery application shared by the worker and the web processes."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ramsite.settings")

app = Celery("ramsite")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
