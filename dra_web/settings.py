"""Django settings for dra-web, read from the environment.

DATABASE_URL (SQLite file by default, PostgreSQL in production), REDIS_URL (none: Celery runs
tasks in-process), SECRET_KEY, ALLOWED_HOSTS, DEBUG, DRA_WEB_MAX_UPLOAD_BYTES (50 MB).
"""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def _env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in ("1", "true", "yes", "on")


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value not in (None, "") else default


def _env_float(name: str, default: float) -> float:
    value = os.environ.get(name)
    return float(value) if value not in (None, "") else default


DEBUG = _env_bool("DEBUG", True)
_DEV_SECRET_KEY = "dev-only-insecure-key-set-SECRET_KEY-in-production"
# Keys that were ever shipped as defaults (docker-compose, docs): never accepted in production.
_KNOWN_SECRET_KEYS = {_DEV_SECRET_KEY, "change-me-in-production-please", "change-me"}
SECRET_KEY = os.environ.get("SECRET_KEY") or (_DEV_SECRET_KEY if DEBUG else "")
if not DEBUG and (
    not SECRET_KEY
    or SECRET_KEY in _KNOWN_SECRET_KEYS
    or len(set(SECRET_KEY)) < 5
    or len(SECRET_KEY) < 50
):
    raise ImproperlyConfigured(
        "SECRET_KEY must be set to a real secret (at least 50 random characters) when DEBUG is "
        "off; generate one with: python -c 'import secrets; print(secrets.token_urlsafe(50))'"
    )
ALLOWED_HOSTS = [
    h.strip()
    for h in os.environ.get("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver").split(",")
    if h.strip()
]
CSRF_TRUSTED_ORIGINS = [
    o.strip() for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()
]

# The pages and reviews apps are written by another part of the team; they join when present.
_OPTIONAL_APPS = [
    f"dra_web.{app}"
    for app in ("pages", "reviews")
    if (BASE_DIR / "dra_web" / app / "__init__.py").is_file()
]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "dra_web.accounts",
    "dra_web.snapshots",
    "dra_web.runs",
    *_OPTIONAL_APPS,
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "dra_web.middleware.RejectNulMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "dra_web.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

WSGI_APPLICATION = "dra_web.wsgi.application"

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or f"sqlite:///{BASE_DIR / 'db.sqlite3'}",
        conn_max_age=_env_int("DATABASE_CONN_MAX_AGE", 0),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The Celery worker writes progress while the web process reads: wait instead of failing.
    DATABASES["default"].setdefault("OPTIONS", {})["timeout"] = 30
    # Transactions take the write lock when they begin: a deferred one that reads, then
    # writes (a worker claiming its run while the web stores another) gets "database is
    # locked" at once, without waiting for the timeout.
    DATABASES["default"]["OPTIONS"]["transaction_mode"] = "IMMEDIATE"
    if os.environ.get("DRA_WEB_TEST_DB_NAME"):
        DATABASES["default"]["TEST"] = {"NAME": os.environ["DRA_WEB_TEST_DB_NAME"]}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"] if (BASE_DIR / "static").is_dir() else []
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", BASE_DIR / "staticfiles"))

# Without DEBUG, serve STATIC_ROOT from Django itself (no proxy in front, e.g. docker-compose).
DRA_WEB_SERVE_STATIC = _env_bool("DRA_WEB_SERVE_STATIC", False)

# --- HTTPS (production behind TLS) -------------------------------------------------------------
# DRA_WEB_HTTPS=true turns on every setting `manage.py check --deploy` asks for; each one can
# also be set on its own with Django's own name.
DRA_WEB_HTTPS = _env_bool("DRA_WEB_HTTPS", False)
SECURE_SSL_REDIRECT = _env_bool("SECURE_SSL_REDIRECT", DRA_WEB_HTTPS)
SECURE_HSTS_SECONDS = _env_int("SECURE_HSTS_SECONDS", 31536000 if DRA_WEB_HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = _env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", DRA_WEB_HTTPS)
SECURE_HSTS_PRELOAD = _env_bool("SECURE_HSTS_PRELOAD", DRA_WEB_HTTPS)
SESSION_COOKIE_SECURE = _env_bool("SESSION_COOKIE_SECURE", DRA_WEB_HTTPS)
CSRF_COOKIE_SECURE = _env_bool("CSRF_COOKIE_SECURE", DRA_WEB_HTTPS)
# A TLS-terminating proxy in front says so with this header ("HEADER,value"); only set it when
# the proxy always overwrites the header.
_proxy_header = os.environ.get("SECURE_PROXY_SSL_HEADER", "")
if _proxy_header:
    _name, _, _value = _proxy_header.partition(",")
    SECURE_PROXY_SSL_HEADER = (_name.strip(), _value.strip() or "https")
# /healthz/ answers container health checks over plain HTTP inside the network.
SECURE_REDIRECT_EXEMPT = [r"^healthz/$"]

LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

# --- uploads ---------------------------------------------------------------------------------
DRA_WEB_MAX_UPLOAD_BYTES = _env_int("DRA_WEB_MAX_UPLOAD_BYTES", 50 * 1024 * 1024)
# Raw-body uploads are read by Django's request.body: let them through up to our own limit,
# which the API checks first and answers with 413 and a message.
DATA_UPLOAD_MAX_MEMORY_SIZE = DRA_WEB_MAX_UPLOAD_BYTES + 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
# Django's own limit on multipart files; the API answers more with a JSON 400.
DATA_UPLOAD_MAX_NUMBER_FILES = _env_int("DRA_WEB_MAX_UPLOAD_FILES", 100)

# --- runs ------------------------------------------------------------------------------------
# A running run whose worker has not written a heartbeat for this long is failed by the reaper.
DRA_WEB_RUN_HEARTBEAT_SECONDS = _env_float("DRA_WEB_RUN_HEARTBEAT_SECONDS", 5.0)
DRA_WEB_RUN_STALE_SECONDS = _env_float("DRA_WEB_RUN_STALE_SECONDS", 90.0)
# Progress is written at most this often (plus once at the end).
DRA_WEB_PROGRESS_INTERVAL_SECONDS = _env_float("DRA_WEB_PROGRESS_INTERVAL_SECONDS", 0.5)
DRA_WEB_RUN_TIME_LIMIT_SECONDS = _env_int("DRA_WEB_RUN_TIME_LIMIT_SECONDS", 3600)
# A queued run no worker has started for this long is failed (the broker lost its message);
# sooner when a run queued after it has already started (the queue is first in, first out).
DRA_WEB_RUN_QUEUED_STALE_SECONDS = _env_float("DRA_WEB_RUN_QUEUED_STALE_SECONDS", 6 * 3600.0)
# How often Celery beat runs the reaper (CELERY_BEAT_SCHEDULE below).
DRA_WEB_REAP_INTERVAL_SECONDS = _env_float("DRA_WEB_REAP_INTERVAL_SECONDS", 15.0)
# Bounds of the API's run options (the command line has none).
DRA_WEB_MAX_TIMEOUT_SECONDS = _env_float("DRA_WEB_MAX_TIMEOUT_SECONDS", 300.0)
DRA_WEB_MAX_TRACE_NODES = _env_int("DRA_WEB_MAX_TRACE_NODES", 2_000_000)
# Finished runs older than this many days are deleted with their traces (hourly, on Celery
# beat, and by `manage.py prune_runs`), except pinned runs and runs with reviews; 0 keeps all.
DRA_WEB_RUN_RETENTION_DAYS = _env_int("DRA_WEB_RUN_RETENTION_DAYS", 90)

# --- login throttle (the form and POST /api/auth/token/) --------------------------------------
DRA_WEB_LOGIN_MAX_FAILURES = _env_int("DRA_WEB_LOGIN_MAX_FAILURES", 10)
DRA_WEB_LOGIN_WINDOW_SECONDS = _env_int("DRA_WEB_LOGIN_WINDOW_SECONDS", 300)

# --- REST framework --------------------------------------------------------------------------
REST_FRAMEWORK = {
    # Token first: its WWW-Authenticate header makes an anonymous request a 401, not a 403.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_RENDERER_CLASSES": [
        "dra_web.renderers.SafeJSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "DEFAULT_PARSER_CLASSES": [
        "dra_web.parsers.SafeJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "EXCEPTION_HANDLER": "dra_web.exceptions.api_exception_handler",
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "dra_web.pagination.Pagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "dra-web API",
    "DESCRIPTION": "Upload cluster snapshots, run Karpenter's DRA allocator on them, read the "
    "result, the DFS search trace and diffs between runs.",
    "VERSION": "v1",
    "SERVE_INCLUDE_SCHEMA": False,
    # Assets from drf-spectacular-sidecar: the docs pages never load from a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# --- Celery ----------------------------------------------------------------------------------
REDIS_URL = os.environ.get("REDIS_URL", "")
# Without Redis, `make run` points DRA_WEB_BROKER_DIR at a directory: kombu's filesystem
# transport, a broker that needs no server, with a real worker beside runserver. With neither
# (tests, manage.py shell) tasks execute in-process.
DRA_WEB_BROKER_DIR = os.environ.get("DRA_WEB_BROKER_DIR", "")
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
elif DRA_WEB_BROKER_DIR:
    CELERY_BROKER_URL = "filesystem://"
else:
    CELERY_BROKER_URL = "memory://"
CELERY_RESULT_BACKEND = None  # runs keep their own state in the database
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ALWAYS_EAGER = not (REDIS_URL or DRA_WEB_BROKER_DIR)
CELERY_TASK_EAGER_PROPAGATES = False
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# The run's own limit is a SIGALRM in runs.services (Celery's soft limit raises an Exception
# that code under the simulation may catch); the hard limit kills a pool process stuck past it.
CELERY_TASK_TIME_LIMIT = DRA_WEB_RUN_TIME_LIMIT_SECONDS + 60
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": _env_int("CELERY_VISIBILITY_TIMEOUT", DRA_WEB_RUN_TIME_LIMIT_SECONDS * 2)
}
if DRA_WEB_BROKER_DIR and not REDIS_URL:
    _broker = Path(DRA_WEB_BROKER_DIR)
    for _sub in ("queue", "processed", "control"):
        (_broker / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker / "queue"),
        "data_folder_out": str(_broker / "queue"),
        "processed_folder": str(_broker / "processed"),
        "control_folder": str(_broker / "control"),
        "store_processed": False,
    }
# Periodic tasks, by the names they are registered under (dra_web/runs/task_names.py). Beat
# runs embedded in the worker (`celery worker -B`: docker-compose, scripts/run-dev.sh).
CELERY_BEAT_SCHEDULE = {
    "reap-stale-runs": {
        "task": "dra_web.runs.tasks.reap_stale_runs",
        "schedule": DRA_WEB_REAP_INTERVAL_SECONDS,
    },
    "prune-old-runs": {"task": "dra_web.runs.tasks.prune_old_runs", "schedule": 3600.0},
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "WARNING")},
    "loggers": {"dra_web": {"level": os.environ.get("DRA_WEB_LOG_LEVEL", "INFO")}},
}
