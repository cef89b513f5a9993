from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core import checks


class RunsConfig(AppConfig):
    name = "runs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from runs import signals  # noqa: F401  (connects receivers)

        checks.register(check_queue_settings)


def check_queue_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The per-account limit of running runs stays below the workers' concurrency (runs/queue.py)."""
    limit, workers = settings.RAM_ACCOUNT_MAX_ACTIVE_RUNS, settings.RAM_WORKER_CONCURRENCY
    if limit < 1 or workers < 1:
        return [checks.Error("RAM_ACCOUNT_MAX_ACTIVE_RUNS and RAM_WORKER_CONCURRENCY must be positive.", id="runs.E001")]
    if workers > 1 and limit >= workers:
        return [
            checks.Warning(
                f"RAM_ACCOUNT_MAX_ACTIVE_RUNS ({limit}) is not below RAM_WORKER_CONCURRENCY ({workers}): "
                "one account's runs can occupy every worker and slow every other account.",
                id="runs.W001",
            )
        ]
    return []
