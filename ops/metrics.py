"""The scrape: every process's counters and histograms (multiprocess files),
plus gauges of current state read from the database.

The database gauges are computed at scrape time so that every web and worker
host reports the same truth: runs by status, waiting runs by pause kind, the
queue per account (depth and age of its oldest queued run), executors (up and
their current generation), open screen sockets and pending webhook deliveries.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from django.db import DatabaseError
from django.db.models import Count, Min
from django.utils import timezone
from prometheus_client import CollectorRegistry, generate_latest, multiprocess
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from computers.models import Computer
from computers.selectors import computer_is_ready
from runs.models import Run
from visual.models import VisualSession
from webhooks.models import WebhookDelivery

logger = logging.getLogger(__name__)


class DatabaseCollector(Collector):
    """Gauges of what the database says now."""

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("ram_database_scrape_ok", "1 when the database gauges below could be read.")
        try:
            families = list(self._families())
        except DatabaseError:
            logger.warning("The metrics scrape could not read the database.")
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from families

    def _families(self) -> Iterator[Metric]:
        now = timezone.now()
        runs = GaugeMetricFamily("ram_runs", "Runs by status.", labels=["status"])
        counts = dict(Run.objects.order_by().values_list("status").annotate(n=Count("id")))
        for status in Run.Status.values:
            runs.add_metric([status], counts.get(status, 0))
        yield runs

        waiting = GaugeMetricFamily("ram_runs_waiting", "Runs waiting for input, by pause kind.", labels=["kind"])
        for kind, n in (
            Run.objects.filter(status=Run.Status.WAITING_FOR_INPUT)
            .order_by()
            .values_list("pause_kind")
            .annotate(n=Count("id"))
        ):
            waiting.add_metric([kind or "unknown"], n)
        yield waiting

        depth = GaugeMetricFamily("ram_queue_depth", "Queued runs, by account.", labels=["account"])
        age = GaugeMetricFamily(
            "ram_queue_oldest_age_seconds", "Age of the oldest queued run, by account.", labels=["account"]
        )
        for account_id, n, oldest in (
            Run.objects.filter(status=Run.Status.QUEUED)
            .order_by()
            .values_list("account_id")
            .annotate(n=Count("id"), oldest=Min("created_at"))
        ):
            depth.add_metric([str(account_id)], n)
            age.add_metric([str(account_id)], max(0.0, (now - oldest).total_seconds()))
        yield depth
        yield age

        up = GaugeMetricFamily("ram_executor_up", "1 when the computer's executor is ready.", labels=["computer"])
        generation = GaugeMetricFamily(
            "ram_executor_generation_info",
            "The computer's current executor generation (new at every executor start).",
            labels=["computer", "generation"],
        )
        for computer in Computer.objects.filter(is_active=True).order_by("id"):
            up.add_metric([computer.id], 1 if computer_is_ready(computer) else 0)
            if computer.generation is not None:
                generation.add_metric([computer.id, str(computer.generation)], 1)
        yield up
        yield generation

        pending = GaugeMetricFamily(
            "ram_webhook_deliveries_pending", "Webhook deliveries not yet delivered nor given up."
        )
        overdue = GaugeMetricFamily(
            "ram_webhook_delivery_overdue_seconds",
            "How long the most overdue pending webhook delivery has been due (0 when none): "
            "growing, no worker consumes the webhooks queue.",
        )
        outbox = WebhookDelivery.objects.filter(status=WebhookDelivery.Status.PENDING).aggregate(
            n=Count("id"), due=Min("next_attempt_at")
        )
        pending.add_metric([], outbox["n"])
        overdue.add_metric([], max(0.0, (now - outbox["due"]).total_seconds()) if outbox["due"] else 0.0)
        yield pending
        yield overdue

        sessions = GaugeMetricFamily("ram_visual_sessions_open", "Open screen sockets, by mode.", labels=["mode"])
        open_counts = dict(
            VisualSession.objects.filter(connected_at__isnull=False, ended_at__isnull=True)
            .order_by()
            .values_list("mode")
            .annotate(n=Count("id"))
        )
        for mode in VisualSession.Mode.values:
            sessions.add_metric([mode], open_counts.get(mode, 0))
        yield sessions


def scrape() -> bytes:
    """The text exposition of this host's processes and the database gauges."""
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    registry.register(DatabaseCollector())
    return generate_latest(registry)
