"""Django settings for dra-web, read from the environment.

DATABASE_URL (SQLite file by default, PostgreSQL in production), REDIS_URL (none: Celery runs
tasks in-process), SECRET_KEY, ALLOWED_HOSTS, DEBUG, DRA_WEB_MAX_UPLOAD_BYTES (50 MB).
"""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url

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
SECRET_KEY = os.environ.get("SECRET_KEY") or (
    "dev-only-insecure-key-set-SECRET_KEY-in-production" if DEBUG else ""
)
if not SECRET_KEY:
    raise RuntimeError("SECRET_KEY must be set when DEBUG is off")
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

LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

# --- uploads ---------------------------------------------------------------------------------
DRA_WEB_MAX_UPLOAD_BYTES = _env_int("DRA_WEB_MAX_UPLOAD_BYTES", 50 * 1024 * 1024)
# Raw-body uploads are read by Django's request.body: let them through up to our own limit,
# which the API checks first and answers with 413 and a message.
DATA_UPLOAD_MAX_MEMORY_SIZE = DRA_WEB_MAX_UPLOAD_BYTES + 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024

# --- runs ------------------------------------------------------------------------------------
# A running run whose worker has not written a heartbeat for this long is failed by the reaper.
DRA_WEB_RUN_HEARTBEAT_SECONDS = _env_float("DRA_WEB_RUN_HEARTBEAT_SECONDS", 5.0)
DRA_WEB_RUN_STALE_SECONDS = _env_float("DRA_WEB_RUN_STALE_SECONDS", 90.0)
# Progress is written at most this often (plus once at the end).
DRA_WEB_PROGRESS_INTERVAL_SECONDS = _env_float("DRA_WEB_PROGRESS_INTERVAL_SECONDS", 0.5)
DRA_WEB_RUN_TIME_LIMIT_SECONDS = _env_int("DRA_WEB_RUN_TIME_LIMIT_SECONDS", 3600)

# --- REST framework --------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.TokenAuthentication",
    ],
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
CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_RESULT_BACKEND = None  # runs keep their own state in the database
CELERY_TASK_IGNORE_RESULT = True
# Without Redis (make run), tasks execute in-process.
CELERY_TASK_ALWAYS_EAGER = not REDIS_URL
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
CELERY_BEAT_SCHEDULE = {
    "reap-stale-runs": {"task": "dra_web.runs.tasks.reap_stale_runs", "schedule": 60.0},
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "WARNING")},
    "loggers": {"dra_web": {"level": os.environ.get("DRA_WEB_LOG_LEVEL", "INFO")}},
}
