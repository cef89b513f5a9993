"""The links a run hands out: locators on this server's origin, never capabilities."""

from urllib.parse import urlencode

from django.conf import settings

from runs.models import Run


def intervention_url(run: Run) -> str:
    return f"{settings.RAM_PUBLIC_ORIGIN}/tasks/{run.id}/intervention"


def viewer_url(computer_id: str) -> str:
    return f"{settings.RAM_PUBLIC_ORIGIN}/view?{urlencode({'computer_id': computer_id})}"
