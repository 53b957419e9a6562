"""What the benchmarks in bench/ share: the server under test and a few small helpers.

`BenchServer` starts a throw-away `manage.py serve` (one process, free loopback ports, its own
SQLite database in a temp data dir, migrated, with an admin token), waits for /healthz and
stops it again. The rest are small helpers: one-shot or keep-alive HTTP requests, CPU time
from /proc, machine facts for the report header, a nearest-rank percentile, the py-spy
lookup, collapsed-stack reading and the PASS/MISS targets table.

Only the standard library, so each script can import it before its own optional packages.
"""
from __future__ import annotations

import http.client
import os
import platform
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = Path(__file__).resolve().parent


# ---------------------------------------------------------------------------------------------
# Small helpers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port: int, method: str, path: str, body: bytes | None = None, headers: dict | None = None,
            conn: http.client.HTTPConnection | None = None) -> tuple[int, bytes]:
    """One HTTP request to 127.0.0.1:port; on `conn` (keep-alive) if given, else on a new connection."""
    own = conn is None
    conn = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        if own:
            conn.close()


def metric_lines(server: "BenchServer") -> list[str]:
    """The lines of the server's /metrics (its admin token), or none if it did not answer 200."""
    status, body = request(server.port, "GET", "/metrics", headers={"Authorization": f"Bearer {server.token}"})
    return body.decode().splitlines() if status == 200 else []


def pct(sorted_values: list[float], p: float) -> float:
    """Nearest-rank percentile of an already sorted list (nan when empty)."""
    if not sorted_values:
        return float("nan")
    k = max(0, min(len(sorted_values) - 1, int(round(p / 100 * len(sorted_values) + 0.5)) - 1))
    return sorted_values[k]


def proc_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc), else 0."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def host_busy_seconds() -> float:
    """CPU seconds all processes on this machine have used (Linux /proc/stat), else 0: tells
    other load sharing the cores apart from the server's own."""
    try:
        values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        idle = values[3] + (values[4] if len(values) > 4 else 0)   # idle + iowait
        return (sum(values[:8]) - idle) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def machine() -> str:
    """One line for a report header: CPUs, model, Python."""
    return f"{os.cpu_count()} CPUs, {cpu_model()}, Python {platform.python_version()}"


def find_pyspy() -> str | None:
    """The venv's py-spy, else one on PATH, else None."""
    candidate = Path(sys.executable).parent / "py-spy"
    return str(candidate) if candidate.exists() else shutil.which("py-spy")


def read_collapsed(raw: Path) -> Iterator[tuple[list[str], int]]:
    """(frames, sample count) per line of a py-spy `--format raw` (collapsed stacks) file."""
    for line in raw.read_text(errors="replace").splitlines():
        stack_text, _, count = line.rpartition(" ")
        if count.isdigit():
            yield stack_text.split(";"), int(count)


def categorise(frames: list[str], categories: list[tuple[str, tuple[str, ...]]]) -> str:
    """The label of the innermost frame that matches one of `categories` (label, substrings)."""
    for frame in reversed(frames):   # leaf first: time goes to the innermost known layer
        for label, keys in categories:
            if any(k in frame for k in keys):
                return label
    return "other"


def print_targets(targets: list[tuple[str, str, bool | None]], name_width: int, value_width: int) -> int:
    """Print `== targets ==` rows (name, value, ok; ok None = only reported); returns the misses."""
    print("\n== targets ==")
    missed = 0
    for name, value, ok in targets:
        verdict = "-" if ok is None else ("PASS" if ok else "MISS")
        missed += ok is False
        print(f"{name:<{name_width}} {value:>{value_width}}  {verdict}")
    return missed


# ---------------------------------------------------------------------------------------------
# The server under test


def child_pids(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (OSError, ValueError):
        return []


def add_backend_arguments(parser) -> None:
    """--database / --redis: run the benchmark's server on PostgreSQL and Redis instead of SQLite."""
    parser.add_argument("--database", default="", metavar="URL",
                        help="postgres://USER@HOST:PORT/ : a fresh database on that server, created and dropped "
                             "by the run (default: SQLite in the work directory)")
    parser.add_argument("--redis", default="", metavar="URL",
                        help="redis://HOST:PORT/DB: the channel layer and cross-process wake-ups (default: none)")


def backend_name(database: str, redis: str) -> str:
    return ("PostgreSQL" if database else "SQLite") + (" + Redis" if redis else "")


def _fresh_postgres(url: str) -> tuple[str, str]:
    """(URL of a new empty database on url's server, its name)."""
    import uuid
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    parts = urlsplit(url)
    name = f"kubedash_bench_{uuid.uuid4().hex[:10]}"
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return urlunsplit(parts._replace(path="/" + name)), admin


class BenchServer:
    """`manage.py serve --workers N` (default 1: one process) on free loopback ports with its
    own database: SQLite in data_dir, or a fresh PostgreSQL database (`database`, dropped at
    stop), with Redis if `redis` is given.

    Subclasses add set-up steps (users, say) by extending prepare(). `root`: another checkout
    of kubedash to serve (an A/B run against older code), this one by default."""

    def __init__(self, data_dir: Path, workers: int = 1, database: str = "", redis: str = "",
                 root: Path | None = None):
        self.root = root or ROOT
        self.data_dir = data_dir
        self.workers = workers
        # Never the developer's Postgres/Redis: the benchmark owns its database.
        self.env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
        self.env.update(KUBEDASH_DATA_DIR=str(data_dir), DJANGO_SETTINGS_MODULE="dashboard.settings",
                        PYTHONPATH=str(self.root), DJANGO_DEBUG="0",
                        # The maintenance Lease's renewals are writes the benchmarks did not make
                        # (watch.py would count them as unmatched events): no election here.
                        KUBEDASH_MAINTENANCE="0")
        self._drop = None
        if database:
            url, admin = _fresh_postgres(database)
            self.env["DATABASE_URL"] = url
            self._drop = (admin, url.rsplit("/", 1)[1])
        if redis:
            self.env["REDIS_URL"] = redis
        self.port, self.tls_port = free_port(), free_port()
        self.proc: subprocess.Popen | None = None
        self.token = ""

    def manage(self, *args: str) -> str:
        out = subprocess.run([sys.executable, str(self.root / "manage.py"), *args], env=self.env, cwd=self.root,
                             capture_output=True, text=True)
        if out.returncode != 0:
            # Scripts passed to `shell -c` are long: name the command, not the script.
            shown = " ".join(a for a in args if "\n" not in a)
            raise SystemExit(f"manage.py {shown} failed:\n{out.stdout}{out.stderr}")
        return out.stdout

    def prepare(self) -> None:
        """Before the server starts: the schema and an admin token for the API."""
        self.manage("migrate", "-v0")
        self.token = self.manage("issue_token", "bench", "--role", "admin").strip().splitlines()[-1]

    def start(self) -> None:
        self.prepare()
        log = open(self.data_dir / "server.log", "wb")
        self.proc = subprocess.Popen(
            [sys.executable, str(self.root / "manage.py"), "serve", "--port", str(self.port),
             "--tls-port", str(self.tls_port), "--workers", str(self.workers)],
            env=self.env, cwd=self.root, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            try:
                if request(self.port, "GET", "/healthz")[0] == 200:
                    return
            except (OSError, http.client.HTTPException):
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the server did not start:\n" + self.log_tail())
            time.sleep(0.2)

    def log_tail(self) -> str:
        try:
            return (self.data_dir / "server.log").read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def cpu_seconds(self) -> float:
        """User + system CPU time of the server (and its worker processes) so far, else 0."""
        if not self.proc:
            return 0.0
        return sum(proc_cpu_seconds(pid) for pid in [self.proc.pid, *child_pids(self.proc.pid)])

    def serving_pids(self) -> list[int]:
        """The processes that answer requests: the workers, or the server itself."""
        return child_pids(self.proc.pid) if self.workers > 1 else [self.proc.pid]

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._drop is not None:
            import psycopg

            admin, name = self._drop
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            self._drop = None
