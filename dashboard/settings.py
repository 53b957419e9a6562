"""Settings from the environment, with safe defaults for the embedded (SQLite) setup.

DATABASE_URL   unset: SQLite file in DATA_DIR (WAL, BEGIN IMMEDIATE); postgres://... for PostgreSQL
REDIS_URL      unset: in-memory channel layer (one process); redis://... for several processes
KUBEDASH_REDIS_PREFIX  the names this deployment uses on Redis (default "kubedash"): distinct per
               deployment sharing one Redis
KUBEDASH_PUBLIC_HOST  the name clients use (compose: the proxy's certificate); added to ALLOWED_HOSTS
DJANGO_SECRET_KEY  unset: generated once into DATA_DIR/secret_key
DJANGO_SECRET_KEY_FALLBACKS  comma-separated earlier keys, still accepted (rotation)
KUBEDASH_PGBOUNCER  "1" when DATABASE_URL goes through PgBouncer's transaction pooling
KUBEDASH_CREDENTIALS_KEY  the Fernet key(s) encrypting followed clusters' credentials
               (dashboard/follow/secrets.py); unset: generated once into DATA_DIR/credentials_key
DJANGO_DEBUG   "1"/"true" for debug pages (never for the API: errors are always metav1.Status)
ALLOWED_HOSTS  comma-separated; default: localhost, 127.0.0.1, [::1]
KUBEDASH_DATA_DIR  where the database, TLS material and secret key live (default ./data)
KUBEDASH_STATIC_ROOT  where collectstatic writes (default DATA_DIR/staticfiles; the image
               collects into the image, outside the data volume)
"""
from __future__ import annotations

import os
import secrets
import sys
import tempfile
from pathlib import Path
from urllib.parse import parse_qsl

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(os.environ.get("KUBEDASH_DATA_DIR", BASE_DIR / "data")).resolve()
DATA_DIR.mkdir(parents=True, exist_ok=True)
# prometheus_client's multiprocess mode writes a file the moment a metric is created, and some
# modules create theirs when imported: the directory must exist before any of them is, in every
# entry point (serve, plain daphne on ASGI_APPLICATION, manage.py commands). It is usually on an
# empty tmpfs (/tmp of a read-only container), so it is made here, the first code each one runs.
if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    Path(os.environ["PROMETHEUS_MULTIPROC_DIR"]).mkdir(parents=True, exist_ok=True)


def _env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "t", "true", "yes", "on"}


def _secret_key() -> str:
    if os.environ.get("DJANGO_SECRET_KEY"):
        return os.environ["DJANGO_SECRET_KEY"]
    path = DATA_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = _secret_key()
# Rotating the key: the new one in DJANGO_SECRET_KEY, the old ones here (comma-separated) until
# the sessions they signed have expired; without them, rotating signs everyone out.
SECRET_KEY_FALLBACKS = [k.strip() for k in os.environ.get("DJANGO_SECRET_KEY_FALLBACKS", "").split(",") if k.strip()]
DEBUG = _env_bool("DJANGO_DEBUG")
ALLOWED_HOSTS = [h.strip() for h in os.environ.get("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]").split(",") if h.strip()]
# The name clients reach the proxy by (compose's .env, the certificate's name) is served too: a
# page on that host would otherwise answer 400. (CSRF needs nothing more: the proxy passes the
# browser's Host, port included, which the Origin then matches.)
KUBEDASH_PUBLIC_HOST = os.environ.get("KUBEDASH_PUBLIC_HOST", "").strip()
if KUBEDASH_PUBLIC_HOST and KUBEDASH_PUBLIC_HOST not in ALLOWED_HOSTS:
    ALLOWED_HOSTS.append(KUBEDASH_PUBLIC_HOST)

INSTALLED_APPS = [
    "daphne",
    "dashboard.web.admin_config.KubedashAdminConfig",   # Django's admin, for unlimited admins only
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "channels",
    "template_partials",
    "dashboard.access",
    "dashboard.kube",
    "dashboard.coordination",
    "dashboard.core",
    "dashboard.batch",
    "dashboard.events",
    "dashboard.web",
    "dashboard.saved",   # saved views, default views, pins (issue 40)
    "dashboard.follow",
    "dashboard.demo",
    "dashboard.server",
    "dashboard.notifications",
]

MIDDLEWARE = [
    # Outermost: CSP on pages, and `Secure` on every cookie of an HTTPS response.
    "dashboard.web.security.SecurityHeadersMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # A database migrated by a newer release (a rollback): 503 for everything but the probes.
    "dashboard.kube.schema_state.SchemaGuardMiddleware",
    # Page HTML gzipped (not streams); before anything that reads or rewrites the body.
    "dashboard.web.compression.PageGZipMiddleware",
    "dashboard.web.staticfiles.StaticFilesMiddleware",   # WhiteNoise: /static/, compressed
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Logout ends every session of the user, not just this one (access/sessions.py).
    "dashboard.access.sessions.SessionEpochMiddleware",
    # A session opened through a share link reaches its own pages and nothing else.
    "dashboard.web.share.ShareLinkMiddleware",
    "dashboard.web.cluster_scope.ClusterScopeMiddleware",   # ?cluster= on pages: runs the request within it
    "dashboard.web.timetravel.TimeTravelMiddleware",   # ?at= on pages: as of then, read-only (issue 38)
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "dashboard.saved.middleware.DefaultViewMiddleware",   # a list's bare address opens the user's default view
]

# Bearer-token API calls without a session cookie need only the security headers
# (dashboard.server.lanes.wants_full_middleware).
KUBEDASH_API_MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "dashboard.kube.schema_state.SchemaGuardMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Whole lists gzipped for clients that accept it, where they are built (the heavy child).
    "dashboard.kube.compression.ListGzipMiddleware",
]

# Lanes (dashboard.server.lanes): the fast lane has one thread; the expensive lane a few.
# Each admits this many waiting requests beyond its running ones, then answers 429.
KUBEDASH_FAST_LANE_QUEUE = int(os.environ.get("KUBEDASH_FAST_LANE_QUEUE", "1000"))
KUBEDASH_EXPENSIVE_LANE_THREADS = int(os.environ.get("KUBEDASH_EXPENSIVE_LANE_THREADS", "2"))
KUBEDASH_EXPENSIVE_LANE_QUEUE = int(os.environ.get("KUBEDASH_EXPENSIVE_LANE_QUEUE", "32"))
# The background lane (writes of kinds that yield to the fast lane: Events): how many may wait,
# and how long one waits at most while renewals are being served (milliseconds).
KUBEDASH_BACKGROUND_LANE_QUEUE = int(os.environ.get("KUBEDASH_BACKGROUND_LANE_QUEUE", "1000"))
KUBEDASH_BACKGROUND_YIELD_MS = float(os.environ.get("KUBEDASH_BACKGROUND_YIELD_MS", "50"))
# Event writes each process admits (a token bucket: this many a second, this burst at once); more
# are answered 429 with Retry-After (client-go's recorder retries), so Events never take more than
# their share of a worker from renewals (docs/SERVING.md, "Events have a budget"). 0: no budget.
KUBEDASH_EVENT_WRITES_PER_SECOND = float(os.environ.get("KUBEDASH_EVENT_WRITES_PER_SECOND", "50"))
KUBEDASH_EVENT_WRITE_BURST = float(os.environ.get("KUBEDASH_EVENT_WRITE_BURST", "100"))
# The fast lane's requests run on the event loop (dashboard/server/inline.py, LoopInline): on
# SQLite bearer-token resource requests when they cannot wait, on PostgreSQL every one, in
# greenlets (server/green.py); 0: always on the lane's threads.
KUBEDASH_INLINE_FAST_LANE = os.environ.get("KUBEDASH_INLINE_FAST_LANE", "1") != "0"
# A whole list (no limit) is sent batch by batch from its snapshot (kube/views.py stream_list);
# 0: built whole, as before (the benchmark's baseline).
KUBEDASH_STREAM_LISTS = os.environ.get("KUBEDASH_STREAM_LISTS", "1") != "0"
# Typed rows a streamed list reads per query (keyset pagination over (namespace, name): no
# server-side cursor, so PgBouncer's transaction pooling is fine).
KUBEDASH_LIST_STREAM_BATCH = int(os.environ.get("KUBEDASH_LIST_STREAM_BATCH", "1000"))
# PostgreSQL: current objects each process keeps for the next update (kube/storage/objcache.py: a PUT
# naming the cached resourceVersion is computed without reading); 0: always read (the baseline).
KUBEDASH_UPDATE_CACHE = int(os.environ.get("KUBEDASH_UPDATE_CACHE", "1024"))
# PostgreSQL: group commit (kube/storage/postgresql.py, migrations 0006 and 0008): an update that
# finds the revision lock taken is handed to its holder, of any process, and commits with its
# write (one WAL flush for all). Off by default: once the fast lane's waits stopped spinning, it
# cost more CPU than its shared flushes saved, at 1 and 2 processes, with PostgreSQL on the app's
# cores or on one of its own (docs/BENCHMARKS.md, issue 42); 1 turns it on.
KUBEDASH_GROUP_COMMIT = _env_bool("KUBEDASH_GROUP_COMMIT", False)

# Operations (docs/SERVING.md): the JSON request log, who may read /metrics, the maintenance
# leader's Lease timings and periodic work, and how long a worker drains on SIGTERM.
KUBEDASH_REQUEST_LOG = _env_bool("KUBEDASH_REQUEST_LOG", True)
# A followed cluster's kubeconfig may name a proxy-url only when this is set (docs/FOLLOWING.md,
# "What a kubeconfig may point at"): a proxy lets the follower reach any address.
KUBEDASH_FOLLOW_ALLOW_PROXY = _env_bool("KUBEDASH_FOLLOW_ALLOW_PROXY", False)
# A followed cluster heard nothing (no event, bookmark or answer) for this long: its watches are
# dead (a partition leaves a half-open connection) and its copy is stale everywhere (docs/FOLLOWING.md,
# "Silence"). Each watch asks to end after half of it, so a healthy cluster speaks at least that often.
KUBEDASH_FOLLOW_SILENCE_SECONDS = float(os.environ.get("KUBEDASH_FOLLOW_SILENCE_SECONDS", "60"))
KUBEDASH_METRICS_TOKEN = os.environ.get("KUBEDASH_METRICS_TOKEN", "")
KUBEDASH_METRICS_USERS = [u.strip() for u in os.environ.get("KUBEDASH_METRICS_USERS", "").split(",") if u.strip()]
KUBEDASH_METRICS_ANONYMOUS = _env_bool("KUBEDASH_METRICS_ANONYMOUS")
KUBEDASH_MAINTENANCE = _env_bool("KUBEDASH_MAINTENANCE", True)
KUBEDASH_MAINTENANCE_LEASE_SECONDS = float(os.environ.get("KUBEDASH_MAINTENANCE_LEASE_SECONDS", "15"))
KUBEDASH_MAINTENANCE_RENEW_DEADLINE = float(os.environ.get("KUBEDASH_MAINTENANCE_RENEW_DEADLINE", "10"))
KUBEDASH_MAINTENANCE_RETRY_PERIOD = float(os.environ.get("KUBEDASH_MAINTENANCE_RETRY_PERIOD", "2"))
KUBEDASH_MAINTENANCE_INTERVAL = float(os.environ.get("KUBEDASH_MAINTENANCE_INTERVAL", "60"))
# Events live this long after their last write (kube-apiserver's --event-ttl, 1 h by default);
# the maintenance leader deletes older ones (dashboard/kube/expiry.py).
KUBEDASH_EVENT_TTL_SECONDS = float(os.environ.get("KUBEDASH_EVENT_TTL_SECONDS", "3600"))
KUBEDASH_SHUTDOWN_GRACE_SECONDS = float(os.environ.get("KUBEDASH_SHUTDOWN_GRACE_SECONDS", "10"))

ROOT_URLCONF = "dashboard.urls"
WEBSOCKET_URLCONF = "dashboard.web.routing"   # websocket routes (dashboard.server.asgi)
ASGI_APPLICATION = "dashboard.server.asgi.application"
WSGI_APPLICATION = None

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

_default_db = f"sqlite:///{DATA_DIR / 'kubedash.sqlite3'}"
# Persistent connections: requests run on a few long-lived lane threads (dashboard/server/lanes.py),
# so a process holds one connection per thread instead of opening one per request.
DATABASES = {"default": dj_database_url.parse(os.environ.get("DATABASE_URL", _default_db), conn_max_age=600,
                                              conn_health_checks=True)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Django's backend, with writers taking turns through a lock file (kube/sqlite/base.py).
    DATABASES["default"]["ENGINE"] = "dashboard.kube.sqlite"
    DATABASES["default"]["OPTIONS"] = {
        # Writers take the lock at BEGIN, so revision numbers commit in order (see store.py).
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    # A file (not :memory:) so live-server tests share it; one per process so runs don't collide.
    DATABASES["default"]["TEST"] = {"NAME": str(Path(tempfile.gettempdir()) / f"kubedash-test-{os.getpid()}.sqlite3")}

if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Django's backend, with a health check that asks the socket before it asks the server
    # (kube/postgresql/base.py): one round trip fewer per request.
    DATABASES["default"]["ENGINE"] = "dashboard.kube.postgresql"

# Through PgBouncer's transaction pooling (docs/OPERATIONS.md, "PgBouncer"): also read by migrate.
KUBEDASH_PGBOUNCER = _env_bool("KUBEDASH_PGBOUNCER") and DATABASES["default"]["ENGINE"] != "dashboard.kube.sqlite"
if KUBEDASH_PGBOUNCER:
    # Through PgBouncer in transaction pooling mode: no server-side cursors (a cursor outlives the
    # transaction's server connection) and no prepared statements (psycopg prepares a query after
    # 5 runs, on a server connection the next transaction may not get). docs/OPERATIONS.md.
    DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True
    DATABASES["default"].setdefault("OPTIONS", {})["prepare_threshold"] = None

# The fast lane's threads (dashboard/server/lanes.py): on SQLite one (its requests mostly run on
# the event loop); on PostgreSQL, where a renewal mostly waits for the server's answers, as many
# requests at once on the loop (server/green.py), so their round trips overlap. Each keeps a
# connection: docs/OPERATIONS.md counts them.
KUBEDASH_FAST_LANE_THREADS = int(os.environ.get(
    "KUBEDASH_FAST_LANE_THREADS", "1" if DATABASES["default"]["ENGINE"] == "dashboard.kube.sqlite" else "4"))
# The expensive lane's work (big lists and Tables, pages) runs in a child process of each serving
# process, KUBEDASH_HEAVY_NICE steps lower in OS priority (dashboard/server/heavy.py): it no
# longer shares the renewals' GIL, and the kernel serves renewals first when both want the CPU.
# On by default (0 turns it off). On PostgreSQL the child's database connections are its pool's,
# KUBEDASH_EXPENSIVE_LANE_THREADS however many lists stream (docs/OPERATIONS.md counts them); its
# memory is in the shipped pods' memory request (deploy/kubernetes).
KUBEDASH_HEAVY_PROCESS = os.environ.get("KUBEDASH_HEAVY_PROCESS", "1") != "0"
# How much lower: nice steps (0-19), or "idle" (SCHED_IDLE: only CPU nothing else wants).
KUBEDASH_HEAVY_NICE = os.environ.get("KUBEDASH_HEAVY_NICE", "19")
# While the fast lane is busy, the child works at most this share of the time (it sleeps at each
# pause point, kube/yielding.py, in proportion to the work since the last; heavy_child.Pacer):
# OS priority alone does not keep its work off the renewals' path (docs/SERVING.md). 1 = none.
KUBEDASH_HEAVY_DUTY = float(os.environ.get("KUBEDASH_HEAVY_DUTY", "0.1"))

REDIS_URL = os.environ.get("REDIS_URL", "")
# What this deployment's names on Redis start with (the watch wake-up channel "<prefix>:revisions",
# dashboard/kube/notify.py): deployments sharing one Redis need prefixes of their own (publish/
# subscribe channels ignore the database number), or each wakes the other's processes for nothing.
KUBEDASH_REDIS_PREFIX = os.environ.get("KUBEDASH_REDIS_PREFIX", "kubedash").strip() or "kubedash"
if REDIS_URL:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer",
                                  "CONFIG": {"hosts": [REDIS_URL], "prefix": f"{KUBEDASH_REDIS_PREFIX}:asgi"}}}
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("KUBEDASH_STATIC_ROOT", DATA_DIR / "staticfiles"))
# Compressed, hashed names once `collectstatic` ran; plain names from the finders before
# (dashboard/web/staticfiles.py says how).
STORAGES = {"default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
            "staticfiles": {"BACKEND": "dashboard.web.staticfiles.StaticStorage"}}
STATICFILES_FINDERS = ["django.contrib.staticfiles.finders.FileSystemFinder",
                       "django.contrib.staticfiles.finders.AppDirectoriesFinder",
                       "dashboard.web.staticfiles.CollectedFinder"]
WHITENOISE_USE_FINDERS = True

LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"


# Sign-in with OpenID Connect (dashboard/access/oidc.py; docs/OPERATIONS.md "Signing in with your
# identity provider"): on when KUBEDASH_OIDC_ISSUER is set.
def _oidc_settings() -> dict | None:
    issuer = os.environ.get("KUBEDASH_OIDC_ISSUER", "").strip().rstrip("/")
    if not issuer:
        return None
    secret = os.environ.get("KUBEDASH_OIDC_CLIENT_SECRET", "")
    secret_file = os.environ.get("KUBEDASH_OIDC_CLIENT_SECRET_FILE", "").strip()
    if secret_file:
        secret = Path(secret_file).read_text().strip()
    def value(name: str, default: str) -> str:
        return os.environ.get(name, "").strip() or default   # (compose passes unset ones as "")

    return {
        "issuer": issuer,
        "client_id": value("KUBEDASH_OIDC_CLIENT_ID", "kubedash"),
        "client_secret": secret,
        "ca_file": value("KUBEDASH_OIDC_CA_FILE", "") or None,
        "scopes": value("KUBEDASH_OIDC_SCOPES", "openid profile email groups").split(),
        "username_claim": value("KUBEDASH_OIDC_USERNAME_CLAIM", "email"),
        "groups_claim": value("KUBEDASH_OIDC_GROUPS_CLAIM", "groups"),
        "name": value("KUBEDASH_OIDC_NAME", "your identity provider"),
        # Extra authorization request parameters, as a query string: e.g. "prompt=consent" (what
        # OpenID Connect asks for with offline_access), Google's "access_type=offline&prompt=consent".
        "auth_params": dict(parse_qsl(os.environ.get("KUBEDASH_OIDC_AUTH_PARAMS", ""))),
    }


KUBEDASH_OIDC = _oidc_settings()
# Bearer JWTs for the API (dashboard/access/jwt_authn.py): a file in kube-apiserver's
# AuthenticationConfiguration format (apiserver.config.k8s.io/v1beta1).
KUBEDASH_AUTHENTICATION_CONFIG = os.environ.get("KUBEDASH_AUTHENTICATION_CONFIG", "").strip()
# KUBEDASH_LOCAL_LOGIN=0: no username/password form (only the identity provider signs people in).
KUBEDASH_LOCAL_LOGIN = _env_bool("KUBEDASH_LOCAL_LOGIN", True)
# Whom a person without access is told to ask (the no-access page); unset: the unlimited admins.
KUBEDASH_ACCESS_CONTACT = os.environ.get("KUBEDASH_ACCESS_CONTACT", "").strip()

# Kubernetes API limits.
KUBEDASH_MAX_BODY_BYTES = 3 * 1024 * 1024          # kube-apiserver's default request body limit
DATA_UPLOAD_MAX_MEMORY_SIZE = KUBEDASH_MAX_BODY_BYTES + 1024

# What a client may send and how slowly (dashboard.server.protocol; docs/SERVING.md, "Limits").
# A body that may exceed this comes only from a request whose token or session is checked
# first (401 before it is read).
KUBEDASH_ANONYMOUS_BODY_BYTES = int(os.environ.get("KUBEDASH_ANONYMOUS_BODY_BYTES", str(64 * 1024)))
KUBEDASH_MAX_URL_BYTES = int(os.environ.get("KUBEDASH_MAX_URL_BYTES", str(128 * 1024)))       # 414 above
KUBEDASH_MAX_HEADER_BYTES = int(os.environ.get("KUBEDASH_MAX_HEADER_BYTES", str(64 * 1024)))  # 431 above
# From a request's first byte to the end of its headers (kube-apiserver: ReadHeaderTimeout 32 s),
# and between requests on a kept-alive connection (kube-apiserver: IdleTimeout 90 s).
KUBEDASH_HEADER_TIMEOUT_SECONDS = float(os.environ.get("KUBEDASH_HEADER_TIMEOUT_SECONDS", "32"))
KUBEDASH_IDLE_TIMEOUT_SECONDS = float(os.environ.get("KUBEDASH_IDLE_TIMEOUT_SECONDS", "90"))
# A live page's heartbeat (web/consumers.py): the server's beat, the page's "not live" after two missed.
KUBEDASH_LIVE_HEARTBEAT_SECONDS = float(os.environ.get("KUBEDASH_LIVE_HEARTBEAT_SECONDS", "5"))
# Live pages only listen but for their heartbeat's answer: any other frame from a client closes its
# socket (web/socket_limits.py); larger frames get 1009 from the protocol. Each user may open sockets
# in bursts of CONNECT_BURST, refilled at CONNECTS_PER_SECOND (a page load or a reconnect is one).
KUBEDASH_WEBSOCKET_MAX_MESSAGE_BYTES = int(os.environ.get("KUBEDASH_WEBSOCKET_MAX_MESSAGE_BYTES", str(64 * 1024)))
KUBEDASH_WEBSOCKET_CONNECT_BURST = float(os.environ.get("KUBEDASH_WEBSOCKET_CONNECT_BURST", "100"))
KUBEDASH_WEBSOCKET_CONNECTS_PER_SECOND = float(os.environ.get("KUBEDASH_WEBSOCKET_CONNECTS_PER_SECOND", "5"))
# Refusals only a hostile client earns (a body over the decoding limits, a handshake over the
# socket budget) are answered this much later (server/tarpit.py); 0 answers them at once.
KUBEDASH_TARPIT_SECONDS = float(os.environ.get("KUBEDASH_TARPIT_SECONDS", "1"))
# Revision-log retention (compaction): keep at least this many revisions and this much time.
KUBEDASH_RETAIN_REVISIONS = int(os.environ.get("KUBEDASH_RETAIN_REVISIONS", "100000"))
KUBEDASH_RETAIN_SECONDS = int(os.environ.get("KUBEDASH_RETAIN_SECONDS", "3600"))
# What the pages travel through (?at=, /changes/: issue 38), apart from the watch window above:
# compaction keeps every revision this long (past the watch window, renewal-only writes thinned
# to one per KUBEDASH_HISTORY_THIN_SECONDS per object). docs/OPERATIONS.md, "History".
KUBEDASH_HISTORY_SECONDS = int(os.environ.get("KUBEDASH_HISTORY_SECONDS", str(7 * 24 * 3600)))
KUBEDASH_HISTORY_THIN_SECONDS = int(os.environ.get("KUBEDASH_HISTORY_THIN_SECONDS", "60"))
# Past the watch window, each object's kept revisions of one such span are packed into one row
# (kube/pack.py: ~20 bytes a revision); 0 packs nothing.
KUBEDASH_HISTORY_PACK_SECONDS = int(os.environ.get("KUBEDASH_HISTORY_PACK_SECONDS", "3600"))

# Watch: bookmark interval, the floor of the randomized stream lifetime, per-watcher queue
# bound (a watcher this far behind is closed and resumes), and the hub's safety poll.
KUBEDASH_WATCH_BOOKMARK_SECONDS = float(os.environ.get("KUBEDASH_WATCH_BOOKMARK_SECONDS", "60"))
KUBEDASH_WATCH_MIN_TIMEOUT_SECONDS = float(os.environ.get("KUBEDASH_WATCH_MIN_TIMEOUT_SECONDS", "1800"))
KUBEDASH_WATCH_QUEUE_SIZE = int(os.environ.get("KUBEDASH_WATCH_QUEUE_SIZE", "1000"))
KUBEDASH_WATCH_POLL_SECONDS = float(os.environ.get("KUBEDASH_WATCH_POLL_SECONDS", "2"))
# On SQLite the hub also checks this often whether another process committed (data_version).
KUBEDASH_WATCH_FOLLOW_SECONDS = float(os.environ.get("KUBEDASH_WATCH_FOLLOW_SECONDS", "0.002"))

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "dashboard.access.authentication.BearerTokenAuthentication",
        "dashboard.access.authentication.KubeSessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": [],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": [],
    "UNAUTHENTICATED_USER": None,
    "EXCEPTION_HANDLER": "dashboard.kube.views.exception_handler",
}

# Security headers (pages); cookies are marked secure when the request came over HTTPS
# (dashboard.web.security: per request, since one server answers both HTTP and HTTPS).
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"

# Logs (docs/OPERATIONS.md, "Logs"): every line on stdout/stderr one JSON object (json, the
# default, as the request lines always are: dashboard/server/logs.py), or the message alone (text).
# `manage.py start` (the README's first command, a person at a terminal) defaults to text, and
# its workers inherit that through the environment; `serve` (production) to json.
if sys.argv[1:2] == ["start"]:
    os.environ.setdefault("KUBEDASH_LOG_FORMAT", "text")
KUBEDASH_LOG_FORMAT = os.environ.get("KUBEDASH_LOG_FORMAT", "json").strip().lower()
if KUBEDASH_LOG_FORMAT not in ("json", "text"):
    raise ValueError(f"KUBEDASH_LOG_FORMAT must be json or text, not {KUBEDASH_LOG_FORMAT!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"json": {"()": "dashboard.server.logs.JsonFormatter"},
                   "text": {"format": "%(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": KUBEDASH_LOG_FORMAT},
                 # kubedash.audit on stdout (the request lines' stream), as docs/OPERATIONS.md says.
                 "stdout": {"class": "logging.StreamHandler", "formatter": KUBEDASH_LOG_FORMAT,
                            "stream": "ext://sys.stdout"}},
    "root": {"handlers": ["console"], "level": os.environ.get("KUBEDASH_LOG_LEVEL", "WARNING")},
    # 4xx answers are normal API traffic (409 on a stale renew, 404 on a probe): don't log each one.
    "loggers": {"django.request": {"level": "ERROR"},
                # One JSON line per dashboard write to a followed cluster (follow/writes.py).
                "kubedash.audit": {"level": "INFO", "handlers": ["stdout"], "propagate": False},
                # serve's banner and its supervisor's lines; Daphne's access log (serve --access-log).
                "kubedash.serve": {"level": "INFO", "handlers": ["stdout"], "propagate": False},
                "kubedash.access": {"level": "INFO", "handlers": ["stdout"], "propagate": False}},
}
