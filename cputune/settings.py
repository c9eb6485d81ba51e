"""cputune's only settings module. Every value comes from the environment; bad values fail loudly.

Safe local defaults: a SQLite file and an embedded broker under CPUTUNE_DATA_DIR, so `make run` needs no system service.
Production sets DATABASE_URL (PostgreSQL) and REDIS_URL. `.env.example` lists every variable.
"""

from __future__ import annotations

import os
import re
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import dj_database_url
from csp.constants import NONE, SELF, UNSAFE_INLINE
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean: use one of 1/0, true/false, yes/no, on/off.")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer.") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} is below its minimum of {minimum}.")
    return value


def env_float(name: str, default: float, *, low: float, high: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a number.") from None
    if not low <= value <= high:
        raise ImproperlyConfigured(f"{name}={value} must lie between {low} and {high}.")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def database_from_url(url: str) -> dict[str, Any]:
    """Parse DATABASE_URL; only PostgreSQL and SQLite are supported."""
    scheme = urlsplit(url).scheme
    if scheme not in {"postgres", "postgresql", "pgsql", "sqlite"}:
        raise ImproperlyConfigured(
            f"DATABASE_URL={url!r} is not understood: use postgres://USER:PASSWORD@HOST:PORT/NAME or sqlite:////path/to/file.sqlite3."
        )
    try:
        config: dict[str, Any] = dict(dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True))
    except ValueError as exc:
        raise ImproperlyConfigured(f"DATABASE_URL={url!r} is malformed: {exc}") from None
    if scheme != "sqlite" and not config.get("NAME"):
        raise ImproperlyConfigured(f"DATABASE_URL={url!r} names no database: add /NAME after the host.")
    if scheme == "sqlite":
        config["CONN_MAX_AGE"] = 0
        # WAL lets the web process read while the worker writes; a busy timeout instead of "database is locked".
        # IMMEDIATE transactions take the write lock when they begin, so the timeout applies: a deferred one that
        # read first and wrote after another process's commit failed at once ("database is locked") — seen with
        # `collect --once` run beside make run's worker.
        config["OPTIONS"] = {
            "timeout": 20,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            "transaction_mode": "IMMEDIATE",
        }
    return config


DEBUG = env_bool("DEBUG")
DATA_DIR = Path(os.environ.get("CPUTUNE_DATA_DIR", BASE_DIR / "var"))


def secret_key(data_dir: Path, debug: bool) -> str:
    """SECRET_KEY from the environment, else the one `make run` generated in the data folder (so commands run in
    another terminal sign with the same key), else — with DEBUG only — a fixed development key."""
    key = os.environ.get("SECRET_KEY", "").strip()
    key_file = data_dir / "secret_key"
    if not key and key_file.is_file():
        key = key_file.read_text().strip()
    if key and not debug and (len(key) < 50 or len(set(key)) < 5):
        # Django's own rule (check --deploy, security.W009): a short or repetitive key can be guessed.
        raise ImproperlyConfigured(
            f"SECRET_KEY is too weak ({len(key)} characters, {len(set(key))} distinct): outside DEBUG it needs at "
            "least 50 characters and 5 distinct ones. Generate one with "
            '`python -c "import secrets; print(secrets.token_urlsafe(50))"`.'
        )
    if key:
        return key
    if not debug:
        raise ImproperlyConfigured(
            f"SECRET_KEY is required unless DEBUG=1: export SECRET_KEY, or run `make run` once (it writes one to "
            f"{key_file}, which every command then reads)."
        )
    return "insecure-debug-only-key"  # only ever used with DEBUG on


SECRET_KEY = secret_key(DATA_DIR, DEBUG)

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI served from this site: /api/docs/ works without internet
    "axes",
    "csp",
    "apps.clusters",
    "apps.telemetry",
    "apps.collector",
    "apps.advisor",
    "apps.dashboard",
    "apps.api",
    "apps.lab",
    "apps.verify",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "csp.middleware.CSPMiddleware",
    # Last, as axes requires: turns a login refused for lockout into the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "cputune.urls"
WSGI_APPLICATION = "cputune.wsgi.application"
ASGI_APPLICATION = "cputune.asgi.application"

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

DATABASE_URL = os.environ.get("DATABASE_URL", "")
if not DATABASE_URL:
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    DATABASE_URL = f"sqlite:///{DATA_DIR / 'cputune.sqlite3'}"
DATABASES = {"default": database_from_url(DATABASE_URL)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# Axes first: it refuses a locked-out username+IP before any password is checked. API tokens never pass through
# authenticate(), so the API's token auth is not counted or locked by it.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = env_int("CPUTUNE_LOGIN_FAILURE_LIMIT", 5, minimum=1)  # wrong passwords per username and IP
AXES_COOLOFF_TIME = timedelta(minutes=env_int("CPUTUNE_LOGIN_COOLOFF_MINUTES", 15, minimum=1))
# Per username and IP: one attacker cannot lock a user out from everywhere, nor one office's shared IP everyone.
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_HTTP_RESPONSE_CODE = 429
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard:overview"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "static"
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "cputune.storage.StaticFiles"
        if not DEBUG
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}
# Serve static files from the finders too, so a server started before collectstatic serves them (cputune/storage.py).
WHITENOISE_USE_FINDERS = True

# Production hardening, on unless DEBUG (checked by `manage.py check --deploy`).
SECURE_CONTENT_TYPE_NOSNIFF = True
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = env_bool("CPUTUNE_SECURE_COOKIES", not DEBUG)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_SSL_REDIRECT = env_bool("CPUTUNE_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = env_int("CPUTUNE_HSTS_SECONDS", 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("CPUTUNE_HSTS_INCLUDE_SUBDOMAINS")
SECURE_HSTS_PRELOAD = env_bool("CPUTUNE_HSTS_PRELOAD")
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if env_bool("CPUTUNE_BEHIND_TLS_PROXY") else None
X_FRAME_OPTIONS = "DENY"
# Every script and style from this site (plotly.js and Swagger UI are vendored); no inline script runs.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        # Plotly and Swagger UI set style attributes and add <style> elements as they draw; styles cannot run code.
        "style-src": [SELF, UNSAFE_INLINE],
        # Swagger UI's stylesheet draws its icons as data: SVGs.
        "img-src": [SELF, "data:"],
        "object-src": [NONE],
        "base-uri": [SELF],
        "frame-ancestors": [NONE],
        "form-action": [SELF],
    }
}

# --- Redis, broker and cache -------------------------------------------------------------------------------------
REDIS_URL = os.environ.get("REDIS_URL", "")
for _name, _url in (("REDIS_URL", REDIS_URL),):
    if _url and urlsplit(_url).scheme not in {"redis", "rediss", "unix"}:
        raise ImproperlyConfigured(f"{_name}={_url!r} is not a redis:// URL.")

BROKER_DIR = DATA_DIR / "broker"
# Embedded broker: kombu's filesystem transport needs no service and no extra package; workers poll a folder.
CELERY_BROKER_URL = os.environ.get("CPUTUNE_BROKER_URL") or REDIS_URL or "filesystem://"
CELERY_BROKER_TRANSPORT_OPTIONS: dict = {}
if CELERY_BROKER_URL.startswith("filesystem://"):
    for _folder in ("queue", "processed", "control"):
        (BROKER_DIR / _folder).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "processed_folder": str(BROKER_DIR / "processed"),
        "control_folder": str(BROKER_DIR / "control"),  # else kombu makes ./control in the working directory
        "store_processed": False,
        "polling_interval": 0.2,
    }
    # The filesystem transport has no fanout exchange: no remote control (pidbox), gossip or mingle.
    CELERY_WORKER_ENABLE_REMOTE_CONTROL = False
elif CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    # A task not acknowledged within this many seconds is redelivered to another worker (acks_late).
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env_int("CPUTUNE_VISIBILITY_TIMEOUT", 600, minimum=30)}
CELERY_TASK_IGNORE_RESULT = True
CELERY_RESULT_BACKEND = None
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TIMEZONE = "UTC"
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Celery's Django fixup closes the database connection before and after every task unless this is set: a node task
# then paid a new PostgreSQL backend (fork, authentication, its temporary load table created again) per node —
# visible in a 1,000-node profile. With it, a worker process keeps its connection for up to 2 × this many tasks;
# cputune/celery.py closes it earlier when it is older than CONN_MAX_AGE or broken, as Django does per request.
CELERY_DB_REUSE_MAX = 500

if REDIS_URL:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}}
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

# --- cputune ------------------------------------------------------------------------------------------------------
CPUTUNE_COLLECT_INTERVAL = env_int("CPUTUNE_COLLECT_INTERVAL", 60, minimum=5)  # seconds between collection cycles
CPUTUNE_RETENTION_RAW_DAYS = env_int("CPUTUNE_RETENTION_RAW_DAYS", 8, minimum=1)  # raw samples, dropped by day
CPUTUNE_RETENTION_ROLLUP_DAYS = env_int("CPUTUNE_RETENTION_ROLLUP_DAYS", 90, minimum=1)  # hourly rollups
CPUTUNE_THROTTLE_TARGET = env_float("CPUTUNE_THROTTLE_TARGET", 0.10, low=0.001, high=0.99)
# Pushes per ingest token and node: the agent's default is 4 a minute plus retries (apps/api/throttles.py).
CPUTUNE_INGEST_RATE = os.environ.get("CPUTUNE_INGEST_RATE", "30/min").strip()
if not re.fullmatch(r"[1-9][0-9]*/(s|sec|m|min|h|hour|d|day)", CPUTUNE_INGEST_RATE):
    raise ImproperlyConfigured(
        f"CPUTUNE_INGEST_RATE={CPUTUNE_INGEST_RATE!r}: give pushes per node as N/min (or /s, /h)"
    )
# Seconds a reading or a stored series head may be ahead of this server's clock: readings beyond are refused, and a
# head beyond (a clock that jumped ahead, then corrected) restarts its series instead of blocking it until real time
# catches up (apps/telemetry/ingest.py).
CPUTUNE_CLOCK_SKEW = env_int("CPUTUNE_CLOCK_SKEW", 300, minimum=1)
CPUTUNE_NODE_TIMEOUT = env_int("CPUTUNE_NODE_TIMEOUT", 20, minimum=1)  # seconds for one kubelet scrape
# Seconds between refreshes of the 24 h and 7 d findings (the 1 h ones follow every collection): with a week of
# history they read 24 + 168 hourly rollups per container, most of a refresh's time (benchmarks/bench_storage.py).
CPUTUNE_LONG_WINDOW_REFRESH = env_int("CPUTUNE_LONG_WINDOW_REFRESH", 600, minimum=0)
# Seconds of samples on each side of a change to judge what it did (docs/domain.md#change-effect).
CPUTUNE_CHANGE_WINDOW = env_int("CPUTUNE_CHANGE_WINDOW", 3600, minimum=60)
CPUTUNE_ADMIN_USER = os.environ.get("CPUTUNE_ADMIN_USER", "admin")
CPUTUNE_LAB_ROOT = os.environ.get("CPUTUNE_LAB_ROOT", "cputune-lab")  # under the cpu controller's mount


def _beat_schedule(interval_s: int) -> dict:
    """Each entry expires just under its interval so a stalled worker never builds a backlog."""
    schedule = {
        "collect-all-clusters": {
            "task": "collector.collect_all",
            "schedule": float(interval_s),
            "options": {"expires": max(1.0, interval_s * 0.9)},
        },
        "rollup-hours": {
            "task": "telemetry.rollup",
            "schedule": 300.0,
            "options": {"expires": 270.0},
        },
        "retention": {
            "task": "telemetry.retention",
            "schedule": 3600.0,
            "options": {"expires": 3300.0},
        },
    }
    for name in env_list("CPUTUNE_DISABLE_SCHEDULES", []):
        schedule.pop(name, None)
    return schedule


CELERY_BEAT_SCHEDULE = _beat_schedule(CPUTUNE_COLLECT_INTERVAL)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "apps.api.authentication.ScopedTokenAuthentication",
        "apps.api.authentication.ScopedBearerAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["apps.api.permissions.CanRead"],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_PAGINATION_CLASS": "apps.api.pagination.Pagination",
    "PAGE_SIZE": 100,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
}
SPECTACULAR_SETTINGS = {
    "TITLE": "cputune API",
    "DESCRIPTION": "CFS throttling findings per container: shares floor, quota ceiling, throttle ratio, recommendations.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # The kernel verdict appears as `verdict` (kernel-check) and `kernel_verdict` (report rows): one enum, one name.
    "ENUM_NAME_OVERRIDES": {
        "KernelVerdictEnum": ["fixed", "affected", "unknown"],
        "KindEnum": "apps.advisor.vocabulary.RECOMMENDATION_KINDS",  # the name it had before change kinds came
        "ChangeKindEnum": "apps.clusters.models.CHANGE_KINDS",
        "ChangeVerdictEnum": "apps.advisor.change_effect.VERDICTS",
    },
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
}
