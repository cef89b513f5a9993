"""The process-side Prometheus metrics every app records into.

Counters and histograms live here, below the apps, so that the run loop, the
gateway, the Vault seam and the HTTP edge record into one set of names. They
are multiprocess-safe: with ``PROMETHEUS_MULTIPROC_DIR`` set (settings set it
for the embedded default) each process writes its own files in that folder and
the scrape (``ops.metrics``) sums them, so several web and worker processes on
one host are one view. Gauges of current state (runs by status, waiting runs by
pause kind, queues, executors, open visual sessions) are not kept here: they
are read from the database at scrape time, where every host agrees.

Label values are bounded sets (routes, statuses, tools, codes, outcomes),
never ids chosen by a client and never a secret.
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

HTTP_REQUESTS = Counter(
    "ram_http_requests_total",
    "HTTP requests answered, by route pattern, method and status.",
    ["route", "method", "status"],
)
HTTP_LATENCY = Histogram(
    "ram_http_request_duration_seconds",
    "Time to answer an HTTP request, by route pattern and method.",
    ["route", "method"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)

RUN_PAUSES = Counter("ram_run_pauses_total", "Runs that paused, by pause kind.", ["kind"])
RUNS_FINISHED = Counter("ram_runs_finished_total", "Runs that finished, by final status.", ["status"])
STEP_DURATION = Histogram(
    "ram_step_duration_seconds",
    "Time a run step's tool took to act, by tool.",
    ["tool"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)
BROWSER_LOGIN_OUTCOMES = Counter(
    "ram_browser_login_outcomes_total",
    "browser_login results, by code (``logged_in`` when it succeeded).",
    ["code"],
)

VISUAL_SESSIONS_OPENED = Counter("ram_visual_sessions_opened_total", "Screen sockets accepted, by mode.", ["mode"])
VISUAL_FRAMES_SENT = Counter("ram_visual_frames_sent_total", "Screen frames sent to viewers.")
VISUAL_FRAMES_SKIPPED = Counter(
    "ram_visual_frames_skipped_total", "Screen frames skipped (latest wins, or back-pressure)."
)

EXECUTOR_INPUTS = Counter(
    "ram_executor_inputs_total",
    "Person inputs an executor handed to its browser (past the grant check), by input type.",
    ["type"],
)

VAULT_ERRORS = Counter(
    "ram_vault_errors_total",
    "Vault calls that failed: ``refused`` (a token without the right) or ``unavailable``.",
    ["error"],
)

# Recorded by the webhook delivery task, one increment per delivery attempt:
# ``WEBHOOK_DELIVERIES.labels(outcome="delivered" | "failed" | "gave_up").inc()``.
WEBHOOK_DELIVERIES = Counter("ram_webhook_deliveries_total", "Webhook delivery attempts, by outcome.", ["outcome"])

NOTIFICATIONS_SENT = Counter(
    "ram_notifications_total", "Emails to people about waiting runs, by kind and outcome.", ["kind", "outcome"]
)
