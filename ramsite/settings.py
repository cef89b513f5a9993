"""Settings for every RAM process, read through one django-environ ``env``.

With no environment at all this is the embedded default: SQLite under ``var/``,
the in-memory channel layer, a filesystem Celery transport and the embedded
OpenBao. Production sets ``DATABASE_URL``, ``REDIS_URL`` and ``VAULT_ADDR``.
Every variable is listed with a comment in ``.env.example``.
"""

import os
import re
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from core.files import local_secret_key, local_webhook_key
from ramsite.settings_env import BASE_DIR, VAR_DIR, env
from ramsite.settings_files import *  # noqa: F403 - what RAM stores as files, and where

# The embedded default (no DATABASE_URL) keeps live session keys, tokens, the Celery
# transport and the demo credentials under var/. Every process it starts (migrate,
# the server, the worker with beat, the executor, OpenBao) reads these settings
# first, so each one creates owner-only files: SQLite's -wal/-shm included.
EMBEDDED = not env.str("DATABASE_URL", default="")
if EMBEDDED:
    os.umask(0o077)

DEBUG = env.bool("DEBUG", default=False)
# The embedded default generates and keeps a key under var/ (see core.files);
# production must set SECRET_KEY.
SECRET_KEY = env.str("SECRET_KEY", default="")
if not SECRET_KEY:
    SECRET_KEY = local_secret_key(VAR_DIR)

RAM_PORT = env.int("RAM_PORT", default=8000)
# Web server processes (uvicorn workers); see docs/deployment.md.
RAM_WEB_WORKERS = env.int("RAM_WEB_WORKERS", default=1)
# Threads per web process that run Django's requests (core/asgi_handler.py).
RAM_WEB_THREADS = env.int("RAM_WEB_THREADS", default=4)
# How long a web process may answer from an API key it authenticated without reading it again; the
# bound on a revocation or deactivation reaching the other processes (accounts/services.py).
RAM_API_KEY_CACHE_SECONDS = env.float("RAM_API_KEY_CACHE_SECONDS", default=1.0)
RAM_PUBLIC_ORIGIN = env.str("RAM_PUBLIC_ORIGIN", default=f"http://127.0.0.1:{RAM_PORT}").rstrip("/")
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = [RAM_PUBLIC_ORIGIN]

INSTALLED_APPS = [
    "accounts.apps.RamAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    # Swagger UI's files (swagger-ui-dist), served from /static/ for /api/docs: nothing from the internet.
    "drf_spectacular_sidecar",
    "channels",
    "axes",
    "ramsite",
    "accounts",
    "computers",
    # The browser process's command and the migration history of the tables computers/ took over.
    "computers.apps.ExecutorHistoryConfig",
    "runs",
    "visual",
    "vault_bridge",
    "notifications",
    "webhooks",
    "ops",
]
# The tables of computers and artifacts were created by the ``executor`` app's migrations; that
# history now lives under computers/ (the executor package is the browser process only).
MIGRATION_MODULES = {"executor": "computers.executor_migrations"}

MIDDLEWARE = [
    "core.middleware.HttpMetricsMiddleware",
    "ops.views.ProbeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "accounts.middleware.ActiveAccountMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "core.middleware.PrivatePageHeadersMiddleware",
    "axes.middleware.AxesMiddleware",
]

AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]

ROOT_URLCONF = "ramsite.urls"
WSGI_APPLICATION = None
ASGI_APPLICATION = "ramsite.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.csp",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "accounts.context_processors.sign_in_notice",
            ],
        },
    },
]

DATABASES = {
    "default": env.db_url(
        "DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'ram.sqlite3'}"
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets readers proceed during a write; IMMEDIATE takes the write lock at
    # BEGIN so concurrent writers queue instead of failing on upgrade.
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
    }
else:
    # An unreachable database answers a request 503 within this bound instead of holding it.
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault(
        "connect_timeout", env.int("DATABASE_CONNECT_TIMEOUT", default=5)
    )
    if env.bool("DATABASE_POOL", default=False):
        DATABASES["default"]["OPTIONS"]["pool"] = True
if not DATABASES["default"].get("OPTIONS", {}).get("pool"):
    # A web thread keeps its connection from one request to the next (core/asgi_handler.py);
    # opening one per request cost about 3 ms of CPU on SQLite (make bench's api profile).
    DATABASES["default"]["CONN_MAX_AGE"] = env.int("DATABASE_CONN_MAX_AGE", default=60)
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
DATABASES["default"]["TEST"] = {"NAME": env.str("DATABASE_TEST_NAME", default=None)}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env.str("REDIS_URL", default="")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            # redis-py 8 times out reads after 5 s by default, exactly the channel layer's
            # blocking-pop timeout: every idle consumer would die; give reads more room.
            "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": 15}]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# Celery: Redis in production, a filesystem transport shared by the embedded
# processes otherwise (kombu's memory transport cannot cross processes): ramsite/broker.py, which
# writes each message whole (temporary file, then rename), claims it by a rename that one reader
# wins, and delivers again what a dead worker had taken.
CELERY_BROKER_URL = REDIS_URL or "ramfs://"
CELERY_BROKER_TRANSPORT = None if REDIS_URL else "ramsite.broker:Transport"
# How often the embedded default's worker looks for a new task when its queues are empty (kombu's
# filesystem transport has no push delivery; its default, 1 s, is what a new run waited for its
# first step). Redis delivers at once and ignores it.
RAM_BROKER_POLL_SECONDS = env.float("RAM_BROKER_POLL_SECONDS", default=0.05)
CELERY_BROKER_TRANSPORT_OPTIONS = (
    {}
    if REDIS_URL
    else {
        "polling_interval": RAM_BROKER_POLL_SECONDS,
        "data_folder_in": str(VAR_DIR / "celery" / "queue"),
        "data_folder_out": str(VAR_DIR / "celery" / "queue"),
        "processed_folder": str(VAR_DIR / "celery" / "processed"),
        "control_folder": str(VAR_DIR / "celery" / "control"),
        "claims_folder": str(VAR_DIR / "celery" / "claims"),
        "quarantine_folder": str(VAR_DIR / "celery" / "quarantine"),
        "store_processed": False,
    }
)
if not REDIS_URL:
    for _folder in ("queue", "processed", "control", "claims"):
        (VAR_DIR / "celery" / _folder).mkdir(parents=True, exist_ok=True)
CELERY_TASK_ACKS_LATE = True
# Keep RAM's logging configuration (and its redaction filter) in workers.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=False)
# A message not acknowledged (worker died) is delivered again after this long;
# it must exceed the longest step (browser_login's 120 s budget).
if REDIS_URL:
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env.int("RAM_CELERY_VISIBILITY_TIMEOUT", default=300)}
    # A worker whose broker connection breaks (Redis restarted) finishes its current step and exits
    # with status 1, for its supervisor to start it again: Celery's own reconnection to Redis can
    # leave a worker that is alive and consumes nothing (celery/celery#10302). At start it waits
    # for the broker instead.
    CELERY_BROKER_CONNECTION_RETRY = False
    CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Webhook deliveries have a queue of their own: a slow receiver never holds up a run's steps.
CELERY_TASK_ROUTES = {"webhooks.*": {"queue": "webhooks"}}
# What a worker that does everything consumes (`celery -A ramsite worker -Q celery,webhooks`).
RAM_WORKER_QUEUES = ["celery", "webhooks"]
CELERY_BEAT_SCHEDULE = {
    "runs-sweep": {"task": "runs.sweep", "schedule": 30.0},
    "notifications-remind": {"task": "notifications.remind", "schedule": 30.0},
    "webhooks-sweep": {"task": "webhooks.sweep", "schedule": 30.0},
    "visual-sweep": {"task": "visual.sweep", "schedule": 30.0},
    # Idle computers stop (computers/placement.py): checked every 10 s.
    "computers-sweep": {"task": "computers.sweep", "schedule": 10.0},
}

# Vault: absent VAULT_ADDR means the embedded OpenBao under var/openbao.
VAULT_ADDR = env.str("VAULT_ADDR", default="")
VAULT_TOKEN = env.str("VAULT_TOKEN", default="")
VAULT_KV_MOUNT = env.str("VAULT_KV_MOUNT", default="ram")
RAM_OPENBAO_PORT = env.int("RAM_OPENBAO_PORT", default=8209)
# Executors hold no Vault token: every read they make comes with a one-use grant (docs/security.md).

# Connections: Google OAuth 2.0 (authorization code with PKCE and state).
RAM_GOOGLE_CLIENT_ID = env.str("RAM_GOOGLE_CLIENT_ID", default="")
RAM_GOOGLE_CLIENT_SECRET = env.str("RAM_GOOGLE_CLIENT_SECRET", default="")
RAM_GOOGLE_AUTHORIZATION_URL = env.str(
    "RAM_GOOGLE_AUTHORIZATION_URL", default="https://accounts.google.com/o/oauth2/v2/auth"
)
RAM_GOOGLE_TOKEN_URL = env.str("RAM_GOOGLE_TOKEN_URL", default="https://oauth2.googleapis.com/token")
RAM_GOOGLE_SCOPE_PREFIX = env.str("RAM_GOOGLE_SCOPE_PREFIX", default="https://www.googleapis.com/auth/")

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

# Hard lockout after repeated password failures (accounts/lockout.py): AXES_FAILURE_LIMIT per
# username and address, RAM_SIGN_IN_ADDRESS_FAILURE_LIMIT per address over all usernames (one
# address spraying passwords). The order of AXES_LOCKOUT_PARAMETERS is the handler's: pair, address.
AXES_HANDLER = "accounts.lockout.RamAxesHandler"
AXES_FAILURE_LIMIT = env.int("AXES_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = env.float("AXES_COOLOFF_HOURS", default=0.25)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"], ["ip_address"]]
RAM_SIGN_IN_ADDRESS_FAILURE_LIMIT = env.int("RAM_SIGN_IN_ADDRESS_FAILURE_LIMIT", default=30)
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False
# Per username across addresses: growing delays, never a lock (docs/security.md). After
# RAM_SIGN_IN_FREE_FAILURES failures each further one doubles the wait (1 s, 2 s, 4 s, ...) up to
# RAM_SIGN_IN_MAX_DELAY_SECONDS; a browser that signed in as that user before is not delayed.
RAM_SIGN_IN_FREE_FAILURES = env.int("RAM_SIGN_IN_FREE_FAILURES", default=5)
RAM_SIGN_IN_MAX_DELAY_SECONDS = env.int("RAM_SIGN_IN_MAX_DELAY_SECONDS", default=300)
RAM_SIGN_IN_FAILURE_WINDOW_HOURS = env.int("RAM_SIGN_IN_FAILURE_WINDOW_HOURS", default=24)
RAM_KNOWN_DEVICE_DAYS = env.int("RAM_KNOWN_DEVICE_DAYS", default=90)

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# What RAM stores as files (artifacts, recordings, downloads, uploads, stored profiles) and where:
# ramsite/settings_files.py (imported above).


STATIC_URL = "/static/"
STATIC_ROOT = VAR_DIR / "static"
STATICFILES_DIRS = [BASE_DIR / "static"]

# Transport hardening; secure cookies and HSTS follow the public origin's scheme.
_HTTPS = RAM_PUBLIC_ORIGIN.startswith("https://")
# Under https the session and CSRF cookies take the __Host- prefix: a browser then accepts them
# only Secure, from an https page of this very host, with Path=/ and no Domain, so an http page
# or a sibling subdomain cannot plant its own. (Cookies ignore ports: give RAM a host name of its
# own; see docs/deployment.md.) Renaming them signs everyone out once.
_COOKIE_PREFIX = "__Host-" if _HTTPS else ""
SESSION_COOKIE_NAME = f"{_COOKIE_PREFIX}sessionid"
CSRF_COOKIE_NAME = f"{_COOKIE_PREFIX}csrftoken"
SESSION_COOKIE_SECURE = _HTTPS or env.bool("SESSION_COOKIE_SECURE", default=False)
CSRF_COOKIE_SECURE = _HTTPS or env.bool("CSRF_COOKIE_SECURE", default=False)
SESSION_COOKIE_DOMAIN = None
CSRF_COOKIE_DOMAIN = None
SESSION_COOKIE_PATH = "/"
CSRF_COOKIE_PATH = "/"
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=False)
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31536000 if _HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=True)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=_HTTPS)
if env.bool("RAM_BEHIND_TLS_PROXY", default=False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
SESSION_COOKIE_AGE = env.int("SESSION_COOKIE_AGE", default=8 * 3600)
# same-origin: a request to any other origin carries no Referer at all, while this
# site's own form posts carry their exact Origin (under no-referrer Chromium sends
# "Origin: null", which the CSRF and origin checks rightly refuse). Invites and
# sign-in tokens live in URL fragments, which no Referer ever includes; pages
# holding one-time values in the query override this with no-referrer.
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"

# Django 6's Content Security Policy: nothing from third parties, no inline
# script without the per-response nonce.
from django.utils.csp import CSP  # noqa: E402

SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF, CSP.NONCE],
    "style-src": [CSP.SELF, CSP.NONCE],
    "img-src": [CSP.SELF, "blob:", "data:"],
    "connect-src": [CSP.SELF],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.NONE],
    "frame-ancestors": [CSP.NONE],
    "form-action": [CSP.SELF],
}

# Embedding the clean screen (docs/security.md): exact origins (scheme://host[:port]) whose
# pages may show /view in a frame (its frame-ancestors; /view only, the sign-in page stays
# unframeable). Listing one trusts it not to overlay or disguise the screen. Empty: nobody.
RAM_VIEW_FRAME_ANCESTORS = [o.rstrip("/") for o in env.list("RAM_VIEW_FRAME_ANCESTORS", default=[])]
# Exact origins from which a socket whose ticket a runner key made may connect (WebView apps:
# capacitor://localhost, http://localhost:5173); a socket with no Origin (a native app) is accepted too.
# A ticket made by a cookie session keeps RAM_PUBLIC_ORIGIN exactly. "null" is never accepted.
RAM_VISUAL_TICKET_ORIGINS = [o.rstrip("/") for o in env.list("RAM_VISUAL_TICKET_ORIGINS", default=[])]
for _origin in (*RAM_VIEW_FRAME_ANCESTORS, *RAM_VISUAL_TICKET_ORIGINS):
    if not re.fullmatch(r"[a-z][a-z0-9+.-]*://[^/\s*?#]+", _origin):
        raise ImproperlyConfigured(f"{_origin!r} is not an exact origin (scheme://host[:port]); 'null' and patterns are never accepted.")

# Product limits (the spec's numbers; configurable only where it says so).
RAM_VISUAL_MAX_FPS = env.int("RAM_VISUAL_MAX_FPS", default=4)
RAM_VISUAL_MAX_SOCKETS = env.int("RAM_VISUAL_MAX_SOCKETS", default=4)
RAM_VISUAL_MAX_PENDING_TICKETS = env.int("RAM_VISUAL_MAX_PENDING_TICKETS", default=32)
# Per-account limits below the gateway's, so one account never holds all of it (docs/security.md).
RAM_VISUAL_MAX_SOCKETS_PER_ACCOUNT = env.int("RAM_VISUAL_MAX_SOCKETS_PER_ACCOUNT", default=2)
RAM_VISUAL_MAX_PENDING_TICKETS_PER_ACCOUNT = env.int("RAM_VISUAL_MAX_PENDING_TICKETS_PER_ACCOUNT", default=8)
RAM_CREDENTIAL_REQUEST_TTL_SECONDS = env.int("RAM_CREDENTIAL_REQUEST_TTL_SECONDS", default=900)
# The demo's credential request (`make run`) lasts this long: long enough to read the docs first.
RAM_DEMO_CREDENTIAL_REQUEST_TTL_SECONDS = env.int("RAM_DEMO_CREDENTIAL_REQUEST_TTL_SECONDS", default=8 * 3600)
RAM_IDEMPOTENCY_RETENTION_HOURS = env.int("RAM_IDEMPOTENCY_RETENTION_HOURS", default=48)
RAM_MICROCREDITS_PER_MODEL_CALL = env.int("RAM_MICROCREDITS_PER_MODEL_CALL", default=1000)
# The executor process's own token (ram_ex_..., one per computer: manage.py executor_token), and
# where it reaches the server's internal endpoint (default: RAM_PUBLIC_ORIGIN).
RAM_EXECUTOR_TOKEN = env.str("RAM_EXECUTOR_TOKEN", default="")
RAM_SERVER_INTERNAL_URL = (env.str("RAM_SERVER_INTERNAL_URL", default="") or RAM_PUBLIC_ORIGIN).rstrip("/")
# A computer whose executor sent no heartbeat (every 5 s) for this long reads unavailable: two heartbeats.
RAM_EXECUTOR_STALE_SECONDS = env.float("RAM_EXECUTOR_STALE_SECONDS", default=10.0)
RAM_CHROMIUM_PATH = env.str("RAM_CHROMIUM_PATH", default="/usr/bin/chromium")
# Exceptions to the browsers' egress policy (only public unicast addresses by default):
# CIDRs and exact host:port entries, comma-separated (e.g. "127.0.0.1:8080,10.20.0.0/16").
RAM_BROWSER_EGRESS_ALLOW = env.list("RAM_BROWSER_EGRESS_ALLOW", default=[])
# Chromium keeps its sandbox: an executor started as root runs each computer's browser as an
# unprivileged user of that computer's own, named this prefix and 16 hex digits of the SHA-256 of
# the computer id (created when missing). RAM_CHROMIUM_NO_SANDBOX=true runs it without (a warning).
RAM_BROWSER_USER_PREFIX = env.str("RAM_BROWSER_USER_PREFIX", default="ram-c-")
RAM_CHROMIUM_NO_SANDBOX = env.bool("RAM_CHROMIUM_NO_SANDBOX", default=False)
# The run queue (runs/queue.py): one run per computer, FIFO; an account has at most
# RAM_ACCOUNT_MAX_ACTIVE_RUNS runs running at once (the rest stay queued, never refused).
# The default stays below the workers' concurrency (RAM_WORKER_CONCURRENCY, which
# `make run` passes to its Celery worker), so one account never fills every worker.
RAM_WORKER_CONCURRENCY = env.int("RAM_WORKER_CONCURRENCY", default=2)
# The most computers an account holds (POST /api/computers answers 429 above it; a deleted one
# frees its place, staff may still create more in the admin).
RAM_ACCOUNT_MAX_COMPUTERS = env.int("RAM_ACCOUNT_MAX_COMPUTERS", default=10)
# Computers on demand (computers/placement.py): an account has at most this many computers running
# (placed on an executor host's slot) at once; a computer nothing used for RAM_COMPUTER_IDLE_SECONDS
# (no run, no viewer, no takeover) stops, its profile kept; `make run` runs one executor host with
# RAM_EMBEDDED_COMPUTERS slots (the demo computer and the ones created through the API).
RAM_ACCOUNT_MAX_RUNNING_COMPUTERS = env.int("RAM_ACCOUNT_MAX_RUNNING_COMPUTERS", default=3)
RAM_COMPUTER_IDLE_SECONDS = env.float("RAM_COMPUTER_IDLE_SECONDS", default=300.0)
RAM_EMBEDDED_COMPUTERS = env.int("RAM_EMBEDDED_COMPUTERS", default=3)
# An executor host's own token (ram_host_...: manage.py executor_host_token --host NAME).
RAM_HOST_TOKEN = env.str("RAM_HOST_TOKEN", default="")
RAM_ACCOUNT_MAX_ACTIVE_RUNS = env.int("RAM_ACCOUNT_MAX_ACTIVE_RUNS", default=max(1, RAM_WORKER_CONCURRENCY - 1))
# A run keeps its computer's 30 s agent lease from step to step and renews it this often
# while a tool runs (a 120 s browser_login keeps it).
RAM_LEASE_RENEW_SECONDS = env.float("RAM_LEASE_RENEW_SECONDS", default=10.0)
# One task of the run loop takes steps of one run for at most this long (a step that starts
# before the end finishes), then the run goes to the back of the line: other runs get their turn.
RAM_RUN_SLICE_SECONDS = env.float("RAM_RUN_SLICE_SECONDS", default=2.0)
# Where each computer keeps its browser profile (a 0700 directory per computer): logins survive
# an executor restart, a crash and an upgrade. Reset from the admin or the API; wiped on a move.
RAM_BROWSER_PROFILE_DIR = Path(env.str("RAM_BROWSER_PROFILE_DIR", default=str(VAR_DIR / "profiles")))
# A step still "started" after this long belongs to a dead worker: it is never replayed.
RAM_STEP_MAX_SECONDS = env.int("RAM_STEP_MAX_SECONDS", default=150)
# An external agent's run with no action for this long pauses (kind continue, reason idle_timeout).
RAM_EXTERNAL_IDLE_SECONDS = env.int("RAM_EXTERNAL_IDLE_SECONDS", default=300)
# How long POST /api/runs/{id}/actions waits for a tool before answering 202 (at most 25 s).
RAM_EXTERNAL_ACTION_WAIT_SECONDS = min(25.0, env.float("RAM_EXTERNAL_ACTION_WAIT_SECONDS", default=20.0))
# Long waits (an action's wait, an action's long-poll) an account may hold at once, over every web
# process; beyond them an action is still recorded and started and answers 202 at once, and a
# long-poll answers the step's current state at once. A wait holds no thread (core/waits.py).
RAM_ACCOUNT_MAX_LONG_WAITS = env.int("RAM_ACCOUNT_MAX_LONG_WAITS", default=4)
# The observation's text snapshot, in characters.
RAM_OBSERVATION_MAX_CHARS = env.int("RAM_OBSERVATION_MAX_CHARS", default=20_000)
RAM_TOOL_RESULT_MAX_CHARS = env.int("RAM_TOOL_RESULT_MAX_CHARS", default=10_000)
# browser_login's end-to-end budget (seconds); the spec's 120, lower only for tests.
RAM_BROWSER_LOGIN_BUDGET_SECONDS = env.float("RAM_BROWSER_LOGIN_BUDGET_SECONDS", default=120.0)
# Computers whose browser is not launched by RAM (cdp, steel, browserbase backends): the egress
# policy can only be checked over CDP there (no WebSockets, no pinned addresses); their executor
# refuses to start unless the operator accepts that (docs/browsers.md).
RAM_BROWSER_EGRESS_REMOTE_ACCEPT = env.bool("RAM_BROWSER_EGRESS_REMOTE_ACCEPT", default=False)
# Optional model-driven agent (agent.type "openai_compatible"): an OpenAI-compatible endpoint.
RAM_LLM_BASE_URL = env.str("RAM_LLM_BASE_URL", default="")
RAM_LLM_API_KEY = env.str("RAM_LLM_API_KEY", default="")
RAM_LLM_MODEL = env.str("RAM_LLM_MODEL", default="")

# Signed webhooks (docs/webhooks.md). Their targets obey an egress policy like the browsers':
# public unicast addresses only, unless listed here (CIDRs and exact host:port entries).
RAM_WEBHOOK_EGRESS_ALLOW = env.list("RAM_WEBHOOK_EGRESS_ALLOW", default=[])
# Endpoint secrets are stored encrypted (Fernet) under these keys: the first encrypts, every one
# decrypts (list a new key first to rotate). Every web and worker host needs the same list;
# the embedded default generates one, kept 0600 under var/.
RAM_WEBHOOK_SECRET_KEYS = env.list("RAM_WEBHOOK_SECRET_KEYS", default=[]) or [local_webhook_key(VAR_DIR)]
RAM_WEBHOOK_SECRET_KEYS_SET = bool(env.list("RAM_WEBHOOK_SECRET_KEYS", default=[]))
# Seconds between a failed attempt and the next one; one attempt more than entries (default: 11
# attempts over about 24 hours).
RAM_WEBHOOK_RETRY_SECONDS = [
    float(seconds)
    for seconds in env.list(
        "RAM_WEBHOOK_RETRY_SECONDS", default=["5", "30", "120", "600", "1800", "3600", "7200", "14400", "28800", "28800"]
    )
]
# One attempt (connect, send, the response's status line and headers) is bounded by this.
RAM_WEBHOOK_TIMEOUT_SECONDS = env.float("RAM_WEBHOOK_TIMEOUT_SECONDS", default=10.0)
RAM_WEBHOOK_MAX_ENDPOINTS_PER_ACCOUNT = env.int("RAM_WEBHOOK_MAX_ENDPOINTS_PER_ACCOUNT", default=20)
# Finished deliveries (delivered or given up) are forgotten after this many days.
RAM_WEBHOOK_LOG_RETENTION_DAYS = env.int("RAM_WEBHOOK_LOG_RETENTION_DAYS", default=30)

# Operations: /readyz's details and /metrics on the public origin need this bearer
# token (empty: /metrics answers 404 there and /readyz shows only its status).
RAM_OPS_TOKEN = env.str("RAM_OPS_TOKEN", default="")
# `manage.py serve_metrics` listens here (a private address, off the public origin). `make run`
# checks it is free before it starts anything (as it does RAM_PORT, RAM_OPENBAO_PORT and the
# OpenBao cluster port, RAM_OPENBAO_PORT + 1).
RAM_METRICS_ADDRESS = env.str("RAM_METRICS_ADDRESS", default="127.0.0.1:9464")
# Every process of a host writes its metrics here, and the scrape sums them
# (prometheus-client's multiprocess mode). It must be set before prometheus-client
# is imported, which happens only once the apps load, after these settings.
PROMETHEUS_MULTIPROC_DIR = env.str("PROMETHEUS_MULTIPROC_DIR", default="") or str(VAR_DIR / "prometheus")
os.environ["PROMETHEUS_MULTIPROC_DIR"] = PROMETHEUS_MULTIPROC_DIR
Path(PROMETHEUS_MULTIPROC_DIR).mkdir(parents=True, exist_ok=True)

# Email to people about waiting runs (Django's MAILERS). Like secure cookies, the default
# follows the public origin's scheme: the console on http (the embedded default), SMTP to
# EMAIL_HOST:EMAIL_PORT (default localhost:25) on https; RAM_EMAIL chooses explicitly.
_MAIL_BACKENDS = {
    "console": "django.core.mail.backends.console.EmailBackend",
    "smtp": "django.core.mail.backends.smtp.EmailBackend",
}
RAM_EMAIL = env.str("RAM_EMAIL", default="") or ("smtp" if _HTTPS else "console")
if RAM_EMAIL not in _MAIL_BACKENDS:
    raise ImproperlyConfigured(f"RAM_EMAIL must be one of {sorted(_MAIL_BACKENDS)}, not {RAM_EMAIL!r}.")
MAILERS = {
    "default": {
        "BACKEND": _MAIL_BACKENDS[RAM_EMAIL],
        "OPTIONS": {
            "host": env.str("EMAIL_HOST", default="localhost"),
            "port": env.int("EMAIL_PORT", default=25),
            "username": env.str("EMAIL_HOST_USER", default=""),
            "password": env.str("EMAIL_HOST_PASSWORD", default=""),
            "use_tls": env.bool("EMAIL_USE_TLS", default=False),
            "use_ssl": env.bool("EMAIL_USE_SSL", default=False),
            "timeout": env.int("EMAIL_TIMEOUT", default=20),
        }
        if RAM_EMAIL == "smtp"
        else {},
    }
}
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="RAM <ram@localhost>")
# The console is the embedded default's deliberate choice on a loopback http origin (any other
# http origin fails the deployment checks anyway); on https it would be a mistake, and is reported.
SILENCED_SYSTEM_CHECKS = ["mail.E001"] if RAM_EMAIL == "console" and not _HTTPS else []
# A reminder goes this many seconds before a credential request's deadline.
RAM_NOTIFY_REMINDER_SECONDS = env.int("RAM_NOTIFY_REMINDER_SECONDS", default=300)

# uvicorn's access log (a line per request) in `make run` (run_embedded): off by default there, as
# are the 4xx warnings of django.request; a production web process started with the uvicorn
# command (docs/deployment.md) keeps its access log, and this default is on without the embedded
# default.
RAM_ACCESS_LOG = env.bool("RAM_ACCESS_LOG", default=not EMBEDDED)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"redact": {"()": "core.logging.RedactSecretsFilter"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "filters": ["redact"]},
    },
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    # Request lines of outgoing HTTP clients carry URLs of internal services.
    "loggers": {
        "httpx": {"level": "WARNING"},
        "httpcore": {"level": "WARNING"},
        # The executor's private interface logs each connection at INFO.
        "websockets": {"level": "WARNING"},
        # The MCP transport logs every stateless request at INFO.
        "mcp": {"level": "WARNING"},
        # "Not Found: /favicon.ico" and the like: one line per 4xx, like an access log.
        "django.request": {"level": "WARNING" if RAM_ACCESS_LOG else "ERROR"},
        # The worker's INFO is a line per task (the sweeps every 30 s); the embedded default keeps its warnings.
        **({"celery": {"level": "WARNING"}, "uvicorn.error": {"level": "WARNING"}} if EMBEDDED else {}),
    },
}
