"""Settings, all read from the environment.

DEBUG is off unless set: with nothing set the site is in production mode and refuses to start
without `SECRET_KEY` and `ALLOWED_HOSTS`. `make run` sets `DEBUG=1` (development: SQLite,
Celery through an embedded broker); the tests use `aicr_site.settings_test`.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from aicr_site.lib.env import env_bool, env_list, env_required, env_secret

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = env_bool("DEBUG", default=False)

# Every secret is read through env_secret: NAME, or NAME_FILE naming a file that holds it (compose
# and Kubernetes secrets). Which ones production needs, and the start-up refusal without them:
# aicr_site/secrets.py; what each protects: docs/deployment.md.
if DEBUG:
    SECRET_KEY = env_secret("SECRET_KEY") or "dev-only-insecure-key-never-used-in-production"
    ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"])
else:
    SECRET_KEY = env_secret("SECRET_KEY")
    if not SECRET_KEY:
        raise ImproperlyConfigured(
            "SECRET_KEY must be set when DEBUG is off (production mode): the value, or "
            "SECRET_KEY_FILE naming a file that holds it"
        )
    ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", [])
    if not ALLOWED_HOSTS:
        env_required("ALLOWED_HOSTS")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "axes",
    "recipes_app",
    "evidence_app",
    "validators_app",
]

MIDDLEWARE = [
    # Outermost: counts and times every answer, the refused ones included (/metrics).
    "aicr_site.metrics.MetricsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Before anything reads the request or the database (aicr_site/middleware.py).
    "aicr_site.middleware.ApiJsonErrorsMiddleware",
    "aicr_site.middleware.DatabaseBusyMiddleware",
    "aicr_site.middleware.UnstorableTextMiddleware",
    "aicr_site.middleware.RequestBodyLimitMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    # ETag on every GET answer that has none (a hash of the body) and 304 for If-None-Match:
    # API clients polling lists and details skip unchanged bodies.
    "django.middleware.http.ConditionalGetMiddleware",
    # Last-Modified beside that ETag on API answers (If-Modified-Since answered by the above).
    "aicr_site.last_modified.LastModifiedMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "axes.middleware.AxesMiddleware",  # last, as django-axes requires
]

ROOT_URLCONF = "aicr_site.urls"

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
                "django.template.context_processors.csp",
            ],
        },
    },
]

WSGI_APPLICATION = "aicr_site.wsgi.application"

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or f"sqlite:///{BASE_DIR / 'db.sqlite3'}",
        conn_max_age=int(os.environ.get("DB_CONN_MAX_AGE", "60")),
    )
}
# The database password apart from DATABASE_URL (a compose secret file): it replaces the URL's.
if _database_password := env_secret("DATABASE_PASSWORD"):
    DATABASES["default"]["PASSWORD"] = _database_password
# Concurrency options for SQLite and PostgreSQL: see "Hardening" below.
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = os.environ.get("REDIS_URL", "")

if REDIS_URL:
    CACHES: dict[str, dict[str, Any]] = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
# When each API answer's current bytes were first sent (aicr_site/last_modified.py): per process,
# bounded, so invented query strings cost a culled entry, never shared memory.
CACHES["last-modified"] = {
    "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
    "LOCATION": "last-modified",
    "TIMEOUT": 24 * 3600,
    "OPTIONS": {"MAX_ENTRIES": 20_000},
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
# Collected into the image (Dockerfile); the multi-host test collects into a folder of its own.
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT") or BASE_DIR / "staticfiles")
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if DEBUG
            else "aicr_site.static_storage.MinifiedCompressedManifestStorage"
        )
    },
}

# Strict CSP: no inline script or style anywhere; every asset is served from this origin.
from django.utils.csp import CSP  # noqa: E402

SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF],
    "img-src": [CSP.SELF, "data:"],
    "connect-src": [CSP.SELF],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.NONE],
    "frame-ancestors": [CSP.NONE],
    "form-action": [CSP.SELF],
}

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_SAMESITE = "Strict"
SESSION_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
if not DEBUG:
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", default=True)
    # Only behind a proxy that sets (and strips any client-sent) X-Forwarded-Proto: trusting
    # the header otherwise lets any client claim HTTPS.
    if env_bool("TRUST_X_FORWARDED_PROTO", default=False):
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", "31536000"))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True

# Uploads: the site streams large bodies to disk and refuses anything bigger than this.
DATA_UPLOAD_MAX_MEMORY_SIZE = int(
    os.environ.get("DATA_UPLOAD_MAX_MEMORY_SIZE", str(2 * 1024 * 1024))
)

REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    # Every JSON body through the one bounded loader (aicr_site/parsers.py); views state
    # ``json_limits`` rather than their own parser.
    "DEFAULT_PARSER_CLASSES": [
        "aicr_site.parsers.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticatedOrReadOnly"],
    # Every /api/ error in one shape: code, message, details, request_id (aicr_site/errors.py).
    "EXCEPTION_HANDLER": "aicr_site.errors.api_exception_handler",
    # API clients authenticate with a Bearer token; the session is accepted too (with CSRF) so
    # a signed-in maintainer can use the browsable API. Never HTTP Basic.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "evidence_app.auth.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # Uploads verify signatures (CPU) and store bytes: per user, EVIDENCE_UPLOAD_RATE (the
    # upload view declares its throttle, evidence_app.auth.EvidenceUploadThrottle).
    "DEFAULT_THROTTLE_RATES": {
        "evidence-upload": os.environ.get("EVIDENCE_UPLOAD_RATE", "60/min"),
        # "Test connection" opens a connection from the site per click: per user and cluster,
        # and per user across clusters (validators_app.throttles, on the API and the page).
        "cluster-test": os.environ.get("CLUSTER_TEST_RATE", "6/min"),
        "cluster-test-user": os.environ.get("CLUSTER_TEST_USER_RATE", "20/min"),
    },
}

SPECTACULAR_SETTINGS = {
    "TITLE": "AICR Validation Dashboard API",
    "DESCRIPTION": (
        "Recipes resolved from the AICR catalog, and signed validation evidence: uploaded, "
        "verified before it counts, listed and withdrawn."
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Two models have a `state`: each enum keeps a name of its own (a pointer's was first).
    "ENUM_NAME_OVERRIDES": {
        "StateEnum": "evidence_app.models.PointerState",
        "ExportStateEnum": "evidence_app.models.ExportState",
        "ExportFormatEnum": "evidence_app.models.ExportFormat",
    },
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Deep links put a link inside each operation's expand button (a control within a
    # control: axe's nested-interactive, confusing to screen readers); without them the
    # button holds only text.
    "SWAGGER_UI_SETTINGS": {"deepLinking": False},
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "aicr_site.openapi.document_common_refusals",
    ],
}

# Celery: with REDIS_URL a real broker and worker. Without it, `make run` sets
# CELERY_EMBEDDED_BROKER=1: kombu's filesystem transport under .run/ (no service to install) and
# a worker it starts beside the web server. With neither (the tests), tasks run in-process.
CELERY_EMBEDDED_BROKER = env_bool("CELERY_EMBEDDED_BROKER", default=False) and not REDIS_URL
CELERY_EMBEDDED_DIR = Path(os.environ.get("CELERY_EMBEDDED_DIR") or BASE_DIR / ".run" / "celery")
if CELERY_EMBEDDED_BROKER:
    CELERY_BROKER_URL = "filesystem://"
    # The filesystem transport, with a drain that ends when the worker is told to stop (Ctrl-C
    # under `make run`): aicr_site/embedded_broker.py says why.
    CELERY_BROKER_TRANSPORT = "aicr_site.embedded_broker:Transport"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        # Seconds between looks at the queue folder: how soon a task or a shutdown is seen.
        "polling_interval": 0.25,
        # One folder both ways: the web process writes messages, the worker reads them.
        "data_folder_in": str(CELERY_EMBEDDED_DIR / "queue"),
        "data_folder_out": str(CELERY_EMBEDDED_DIR / "queue"),
        "processed_folder": str(CELERY_EMBEDDED_DIR / "processed"),
        "store_processed": False,
        # Exchange bindings; kombu's default is ./control in the working directory.
        "control_folder": str(CELERY_EMBEDDED_DIR / "control"),
    }
    for _folder in ("queue", "processed", "control"):
        (CELERY_EMBEDDED_DIR / _folder).mkdir(parents=True, exist_ok=True)
    CELERY_RESULT_BACKEND = None
else:
    CELERY_BROKER_URL = REDIS_URL or "memory://"
    CELERY_RESULT_BACKEND = REDIS_URL or None
CELERY_TASK_ALWAYS_EAGER = not (REDIS_URL or CELERY_EMBEDDED_BROKER)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = 60 * 60
CELERY_TASK_SOFT_TIME_LIMIT = 55 * 60
CELERY_TASK_ROUTES = {
    "validators_app.tasks.*": {"queue": "validation"},
    "evidence_app.tasks.*": {"queue": "ingest"},
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
}

# --- Hardening: databases under concurrency, request limits, sign-in throttling, errors ------
# Every value can be set from the environment.

# SQLite (the embedded default) with concurrent writers: WAL lets readers run beside the one
# writer; IMMEDIATE takes the write lock when a transaction starts, so two writers queue on the
# busy timeout instead of one failing mid-transaction with "database is locked". A write that
# still cannot get the lock answers 503 with Retry-After (aicr_site.middleware).
DB_BUSY_TIMEOUT_SECONDS = float(os.environ.get("DB_BUSY_TIMEOUT_SECONDS", "20"))
DB_RETRY_AFTER_SECONDS = int(os.environ.get("DB_RETRY_AFTER_SECONDS", "2"))
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        transaction_mode="IMMEDIATE",
        timeout=DB_BUSY_TIMEOUT_SECONDS,
        init_command="PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    )
# PostgreSQL through psycopg's pool, so a threaded server holds at most DB_POOL_MAX_SIZE
# connections per process however many requests run (the pool replaces persistent connections).
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and env_bool(
    "DB_POOL", default=True
):
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": int(os.environ.get("DB_POOL_MIN_SIZE", "1")),
        "max_size": int(os.environ.get("DB_POOL_MAX_SIZE", "10")),
        # A request waits this long for a free connection, then answers 503.
        "timeout": float(os.environ.get("DB_POOL_TIMEOUT_SECONDS", "10")),
    }

# Request bodies are refused (413) before they are read when larger than the route's cap:
# evidence uploads get EVIDENCE_MAX_UPLOAD_BYTES (below), every other route this.
REQUEST_MAX_BODY_BYTES = int(os.environ.get("REQUEST_MAX_BODY_BYTES", str(1024 * 1024)))
# Routes (URL names) that take uploads: their own cap (checked by the view before it reads the
# body), and the only ones that parse multipart bodies from anonymous clients (the evidence
# API's own token check refuses those that lack one; the snapshot check is public).
REQUEST_UPLOAD_ROUTES = ("evidence:new", "api:evidence-list", "check", "api:check")

# Sign-in throttling (django-axes) on /accounts/login/ and /admin/login/: after
# LOGIN_FAILURE_LIMIT failures for one username from one address, sign-in is refused (429)
# for LOGIN_COOLOFF_MINUTES. The username is normalised the way authentication does it, so
# "admin ", its full-width form (U+FF41…) and "admin" share one counter.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
LOGIN_FAILURE_LIMIT = int(os.environ.get("LOGIN_FAILURE_LIMIT", "10"))
LOGIN_COOLOFF_MINUTES = int(os.environ.get("LOGIN_COOLOFF_MINUTES", "15"))
AXES_FAILURE_LIMIT = LOGIN_FAILURE_LIMIT
AXES_COOLOFF_TIME = timedelta(minutes=LOGIN_COOLOFF_MINUTES)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_USERNAME_CALLABLE = "aicr_site.signin.throttle_username"
AXES_LOCKOUT_CALLABLE = "aicr_site.signin.lockout_response"
AXES_RESET_ON_SUCCESS = True
# The address a failure counts against is REMOTE_ADDR, which a client cannot forge. Behind a
# proxy that overwrites X-Forwarded-For with the client's address (deploy/nginx.conf), set
# TRUST_X_FORWARDED_FOR=1 so clients are told apart instead of all counting as the proxy.
if env_bool("TRUST_X_FORWARDED_FOR", default=False):
    AXES_IPWARE_META_PRECEDENCE_ORDER = ("HTTP_X_FORWARDED_FOR", "REMOTE_ADDR")
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "recipes:list"

# --- Evidence ingest (evidence_app) -----------------------------------------------------------
# Added by the evidence app; every value can be set from the environment.
import json  # noqa: E402

# Largest upload (a Sigstore bundle, an evidence tarball, or a pulled OCI layer); refused with
# 413 before the body is read when Content-Length says more.
EVIDENCE_MAX_UPLOAD_BYTES = int(os.environ.get("EVIDENCE_MAX_UPLOAD_BYTES", str(10 * 1024 * 1024)))
# OIDC issuers a keyless certificate may carry, besides the allowlist's issuers and those
# configured on enabled private trusted roots (comma-separated in the environment).
EVIDENCE_ACCEPTED_ISSUERS = env_list(
    "EVIDENCE_ACCEPTED_ISSUERS",
    [
        "https://token.actions.githubusercontent.com",
        "https://gitlab.com",
        "https://accounts.google.com",
        "https://oauth2.sigstore.dev/auth",
    ],
)
# Optional: every keyless identity (certificate SAN) must fully match this regex.
EVIDENCE_IDENTITY_REGEX = os.environ.get("EVIDENCE_IDENTITY_REGEX") or None
# Optional extra sigstore policies every keyless bundle must satisfy, {policy class: value},
# e.g. {"OIDCRunnerEnvironment": "github-hosted"} (JSON in the environment).
try:
    EVIDENCE_EXTRA_POLICIES = json.loads(os.environ.get("EVIDENCE_EXTRA_POLICIES") or "{}")
except json.JSONDecodeError as exc:
    raise ImproperlyConfigured(f"EVIDENCE_EXTRA_POLICIES is not valid JSON: {exc}") from None
if not isinstance(EVIDENCE_EXTRA_POLICIES, dict):
    raise ImproperlyConfigured(
        "EVIDENCE_EXTRA_POLICIES must be a JSON object, e.g. "
        '{"OIDCRunnerEnvironment": "github-hosted"}'
    )
# OCI references are pulled by an `ingest` worker, never by the web process: on by default only
# when a real broker (REDIS_URL) exists.
EVIDENCE_OCI_ENABLED = env_bool("EVIDENCE_OCI_ENABLED", default=bool(REDIS_URL))
if EVIDENCE_OCI_ENABLED and not REDIS_URL:
    # Without a broker tasks run in-process: the web request itself would pull an address a
    # user typed.
    raise ImproperlyConfigured(
        "EVIDENCE_OCI_ENABLED needs REDIS_URL: OCI pulls run only on an ingest worker, never in "
        "the web process (without a broker, tasks would run inside the request)"
    )
# Registries the worker may pull from (host[:port]); empty = any host with a public address.
EVIDENCE_OCI_ALLOWED_REGISTRIES = env_list("EVIDENCE_OCI_ALLOWED_REGISTRIES", [])
# Allow plain-HTTP pulls from loopback registries (127.0.0.1, ::1, localhost); tests and local
# registries only.
EVIDENCE_OCI_ALLOW_LOOPBACK_HTTP = env_bool("EVIDENCE_OCI_ALLOW_LOOPBACK_HTTP", default=False)
EVIDENCE_OCI_TIMEOUT_SECONDS = float(os.environ.get("EVIDENCE_OCI_TIMEOUT_SECONDS", "30"))
# A worker's claim on an OCI upload; a redelivered task waits this long before taking it over.
EVIDENCE_OCI_LEASE_SECONDS = float(os.environ.get("EVIDENCE_OCI_LEASE_SECONDS", str(15 * 60)))
# Evidence attested longer ago than this is stale ("older than 30 days").
EVIDENCE_STALE_AFTER_DAYS = int(os.environ.get("EVIDENCE_STALE_AFTER_DAYS", "30"))
# The AICR versions this site supports, as AICR's operator policy writes them: comma-separated
# comparisons on semver (>=, >, <=, <, ==), e.g. ">=1.0.0,<2.0.0"; empty = any version.
# Evidence, catalogs and runs of a version outside it (a `dev` build included: not a release)
# are labelled "outside the supported AICR range" and evidence outside it is not counted.
# The stored consensus badges follow a change by themselves (evidence_app.consensus.stored).
from evidence_app.services.versions import parse_supported_range  # noqa: E402

AICR_SUPPORTED_RANGE = os.environ.get("AICR_SUPPORTED_RANGE", "").strip()
try:
    AICR_SUPPORTED_RANGE = parse_supported_range(AICR_SUPPORTED_RANGE).text
except ValueError as exc:
    raise ImproperlyConfigured(f"AICR_SUPPORTED_RANGE={AICR_SUPPORTED_RANGE!r}: {exc}") from None

# Releases (evidence_app.releases): AICR's upstream gate accepts keyless evidence only; key-signed
# evidence (an operator's own KMS key) qualifies a release's profile only when this is set.
RELEASES_ACCEPT_KEY_SIGNED = env_bool("RELEASES_ACCEPT_KEY_SIGNED", default=False)

# --- Validation runs (validators_app) ---------------------------------------------------------
# Runs (RUNS): a running run whose worker sent no heartbeat for this long is taken over by the
# next claim (the beat reaper re-enqueues it) and resumes at the check it was on.
VALIDATION_HEARTBEAT_STALE_SECONDS = float(
    os.environ.get("VALIDATION_HEARTBEAT_STALE_SECONDS", "90")
)
# Claims per run (first start + takeovers) before it ends `error` saying its workers died.
VALIDATION_MAX_ATTEMPTS = int(os.environ.get("VALIDATION_MAX_ATTEMPTS", "3"))
# A queued run whose task message was sent this long ago and never claimed is sent again.
VALIDATION_REQUEUE_QUEUED_SECONDS = float(
    os.environ.get("VALIDATION_REQUEUE_QUEUED_SECONDS", str(10 * 60))
)
VALIDATION_REAP_INTERVAL_SECONDS = float(os.environ.get("VALIDATION_REAP_INTERVAL_SECONDS", "30"))
# The longest a run may take on one worker (all phases); it then ends `error`.
VALIDATION_RUN_TIME_LIMIT_SECONDS = int(
    os.environ.get("VALIDATION_RUN_TIME_LIMIT_SECONDS", str(6 * 60 * 60))
)
# What the orchestrator emulates and where it runs (AICR's flags / environment variables):
# "" = the recipe catalog's AICR version label.
VALIDATION_AICR_VERSION = os.environ.get("VALIDATION_AICR_VERSION", "")
# The AICR commit a `dev` (non-release) version was built from, as AICR_CLI_COMMIT: with it a
# catalog's :latest validator images resolve to :sha-<commit> (AICR's rule) instead of :latest.
VALIDATION_AICR_COMMIT = os.environ.get("VALIDATION_AICR_COMMIT", "")
VALIDATION_NAMESPACE = os.environ.get("VALIDATION_NAMESPACE", "aicr-validation")
VALIDATION_AGENT_IMAGE = os.environ.get("AICR_VALIDATOR_IMAGE", "")
VALIDATION_IMAGE_REGISTRY = os.environ.get("AICR_VALIDATOR_IMAGE_REGISTRY", "")
VALIDATION_IMAGE_TAG = os.environ.get("AICR_VALIDATOR_IMAGE_TAG", "")
VALIDATION_SNAPSHOT_TIMEOUT_SECONDS = float(
    os.environ.get("VALIDATION_SNAPSHOT_TIMEOUT_SECONDS", "300")
)
# Refuse a run whose agent or validator image may name other bytes tomorrow (not pinned by
# digest nor a CI-frozen AICR tag, e.g. a `dev` catalog's :latest): it ends `error` before
# anything is deployed. Off by default: every run records the digest each pod reported, so
# its evidence names the exact images that ran even under a moving tag.
VALIDATION_REFUSE_MUTABLE_IMAGES = env_bool("VALIDATION_REFUSE_MUTABLE_IMAGES", default=False)
CELERY_BEAT_SCHEDULE = {
    "validation-runs-reaper": {
        "task": "validators_app.tasks.runs_reap",
        "schedule": VALIDATION_REAP_INTERVAL_SECONDS,
    },
}
# Clusters (CLUSTERS): Fernet keys for kubeconfigs at rest, comma-separated, newest first (the
# first encrypts, all decrypt; `manage.py rotate_cluster_keys` re-encrypts after adding one).
# Unset in development: a local key is generated into the git-ignored file below.
from cryptography.fernet import Fernet  # noqa: E402

# In a file (CLUSTER_KUBECONFIG_KEY_FILE) the keys may be one a line as well.
CLUSTER_KUBECONFIG_KEYS = env_secret("CLUSTER_KUBECONFIG_KEY").replace("\n", ",").split(",")
CLUSTER_KUBECONFIG_KEYS = [key.strip() for key in CLUSTER_KUBECONFIG_KEYS if key.strip()]
for _key in CLUSTER_KUBECONFIG_KEYS:
    try:
        Fernet(_key.encode("ascii"))
    except (ValueError, UnicodeEncodeError):
        raise ImproperlyConfigured(
            "CLUSTER_KUBECONFIG_KEY holds a value that is not a Fernet key (32 url-safe base64 "
            "bytes; make one with `python manage.py ensure_local_keys --print`)"
        ) from None
CLUSTER_KUBECONFIG_LOCAL_KEY_FILE = (
    BASE_DIR / ".local" / "cluster-kubeconfig.key"
    if DEBUG and not CLUSTER_KUBECONFIG_KEYS
    else None
)
# "Test connection" waits at most this long for the API server (in the web request): the whole
# exchange (connect, TLS, answer), not each read.
CLUSTER_TEST_TIMEOUT_SECONDS = float(os.environ.get("CLUSTER_TEST_TIMEOUT_SECONDS", "10"))
# Where cluster API servers may be (aicr_site.lib.outbound, validators_app.kubeconfig): never
# link-local or unspecified, loopback only for simulated clusters; private ranges (10/8,
# 172.16/12, 192.168/16, 100.64/10, fc00::/7) unless this is off. CLUSTER_ALLOWED_NETWORKS:
# CIDRs reachable whatever those rules say (e.g. a metadata-free lab network), comma-separated.
CLUSTER_PRIVATE_ADDRESSES = env_bool("CLUSTER_PRIVATE_ADDRESSES", default=True)
CLUSTER_ALLOWED_NETWORKS = env_list("CLUSTER_ALLOWED_NETWORKS", [])
import ipaddress  # noqa: E402

for _network in CLUSTER_ALLOWED_NETWORKS:
    try:
        ipaddress.ip_network(_network, strict=False)
    except ValueError:
        raise ImproperlyConfigured(
            f"CLUSTER_ALLOWED_NETWORKS: {_network!r} is not a network (e.g. 10.20.0.0/16)"
        ) from None
# Every answer from a cluster during a run: at most this many bytes, within this many seconds.
CLUSTER_MAX_ANSWER_BYTES = int(os.environ.get("CLUSTER_MAX_ANSWER_BYTES", str(64 * 1024 * 1024)))
CLUSTER_ANSWER_DEADLINE_SECONDS = float(os.environ.get("CLUSTER_ANSWER_DEADLINE_SECONDS", "300"))
# Run evidence (EVIDENCE): the site's ECDSA P-256 private key (PEM) that signs the evidence of
# finished runs; registered as a SigningKey on first use. Unset in development: a local key is
# generated into the git-ignored file below by `manage.py ensure_site_key`.
SITE_SIGNING_KEY = env_secret("SITE_SIGNING_KEY")
SITE_SIGNING_LOCAL_KEY_FILE = (
    BASE_DIR / ".local" / "site-signing-key.pem" if DEBUG and not SITE_SIGNING_KEY else None
)
# Keyless run evidence (EVIDENCE): with an OIDC identity token (the value, or a file re-read per
# run) runs are signed through Sigstore instead of with the site key; the trust config (JSON:
# trusted root + signing config) selects a private instance, empty = Sigstore's public instance.
SITE_SIGSTORE_IDENTITY_TOKEN = os.environ.get("SITE_SIGSTORE_IDENTITY_TOKEN", "")
SITE_SIGSTORE_IDENTITY_TOKEN_FILE = os.environ.get("SITE_SIGSTORE_IDENTITY_TOKEN_FILE", "")
SITE_SIGSTORE_TRUST_CONFIG = os.environ.get("SITE_SIGSTORE_TRUST_CONFIG", "")
# Without a token, run evidence is key-signed: it counts on this site only (AICR's upstream
# gate takes keyless evidence only). A production site says so in `check --deploy` unless the
# operator states that choice here (validators_app.checks).
RUN_EVIDENCE_KEY_SIGNED_ACCEPTED = env_bool("RUN_EVIDENCE_KEY_SIGNED_ACCEPTED", default=False)
# Pushing run evidence to an OCI registry (validators_app.services.publication): the
# `registry/repository` the artifact and its signature referrer go to ("" = no push; a
# malformed one is a system-check error), and the registry login (never shown back; the
# password may come from a file).
RUN_EVIDENCE_OCI_REPOSITORY = os.environ.get("RUN_EVIDENCE_OCI_REPOSITORY", "").strip()
RUN_EVIDENCE_OCI_USERNAME = os.environ.get("RUN_EVIDENCE_OCI_USERNAME", "")
RUN_EVIDENCE_OCI_PASSWORD = os.environ.get("RUN_EVIDENCE_OCI_PASSWORD", "")
RUN_EVIDENCE_OCI_PASSWORD_FILE = os.environ.get("RUN_EVIDENCE_OCI_PASSWORD_FILE", "")
# Stored consensus badges whose counted runs aged into staleness (evidence_app.consensus.stored;
# list reads refresh them too, so this only keeps that work off requests).
CELERY_BEAT_SCHEDULE["consensus-refresh-expired"] = {
    "task": "evidence_app.tasks.consensus_refresh_expired",
    "schedule": float(os.environ.get("CONSENSUS_REFRESH_SECONDS", "300")),
}
# The AICR publication (/aicr/data/, evidence_app.exports.artefact): a change queues one
# rebuild this many seconds later, so a burst of uploads is built once.
PUBLICATION_DEBOUNCE_SECONDS = float(os.environ.get("PUBLICATION_DEBOUNCE_SECONDS", "2"))
# Who builds it: a worker, queued after each change, wherever a broker exists; otherwise the
# first read after a change, in place.
PUBLICATION_BUILT_BY_WORKER = not CELERY_TASK_ALWAYS_EAGER
# Evidence pointers (`manage.py import_evidence`): a pending pointer is tried again after
# BASE * 2^(tries-1) seconds, at most MAX; beat looks for due ones every TICK seconds. Which
# registries a pointer may pull from is the OCI path's policy (EVIDENCE_OCI_ENABLED and an
# explicit EVIDENCE_OCI_ALLOWED_REGISTRIES listing): evidence_app.services.pointers.
EVIDENCE_POINTER_RETRY_BASE_SECONDS = float(
    os.environ.get("EVIDENCE_POINTER_RETRY_BASE_SECONDS", "300")
)
EVIDENCE_POINTER_RETRY_MAX_SECONDS = float(
    os.environ.get("EVIDENCE_POINTER_RETRY_MAX_SECONDS", str(24 * 60 * 60))
)
CELERY_BEAT_SCHEDULE["evidence-pointers-retry"] = {
    "task": "evidence_app.tasks.pointers_retry",
    "schedule": float(os.environ.get("EVIDENCE_POINTER_RETRY_TICK_SECONDS", "300")),
}
# Exports built by a worker (evidence_app.exports.jobs, /exports/ and /api/v1/exports/): the
# file is stored in the database in pieces of this size (any web host serves it; memory holds
# one), kept this many hours after it is done, and a build with no progress for this long is
# failed as stopped. A user has at most this many exports queued or building at once.
EXPORT_CHUNK_BYTES = int(os.environ.get("EXPORT_CHUNK_BYTES", str(1024 * 1024)))
EXPORT_KEEP_HOURS = float(os.environ.get("EXPORT_KEEP_HOURS", "24"))
EXPORT_STALLED_SECONDS = float(os.environ.get("EXPORT_STALLED_SECONDS", str(10 * 60)))
EXPORT_ACTIVE_PER_USER = int(os.environ.get("EXPORT_ACTIVE_PER_USER", "2"))
CELERY_BEAT_SCHEDULE["exports-expire"] = {
    "task": "evidence_app.tasks.exports_expire",
    "schedule": float(os.environ.get("EXPORT_EXPIRE_TICK_SECONDS", "300")),
}
