"""Bearer JWT benchmark (issue 37): is an identity provider's ID token as cheap per request as
a kubedash token, once verified and cached?

    .venv/bin/python bench/jwt_auth.py [--duration 5] [--connections 4] [--rounds 2] [--profile jwt.txt]
                                       [--strict]

In one run: starts the test OpenID provider (tests/oidc_provider.py: npm's oidc-provider over
HTTPS with its own CA; needs node and `cd tests/oidc && npm ci`), gets an ID token from it for
a person in group `bench-viewers` by the authorization code flow with PKCE (its own login and
consent forms, driven over HTTP), starts a throw-away `manage.py serve` (bench/common.py) with a
KUBEDASH_AUTHENTICATION_CONFIG for that provider, binds the group to viewer (`manage.py group
bind`), issues a kubedash viewer token and seeds one Lease. Then wrk GETs that Lease with
  A. the kubedash token (the ceiling: today's token lookup, one SQL query), and
  B. the ID token (verified once, then the cached identity plus the group bindings' query),
interleaved A B A B ... (--rounds pairs, same connection count), and prints each run, the
totals per kind and the ratio JWT/token with the targets (>= 0.9x throughput, p99 <= 1.2x).
`--profile FILE` also samples the server with py-spy during one more JWT run.

Traffic goes only to 127.0.0.1, and every load phase is bounded in time.
"""
from __future__ import annotations

import argparse
import base64
import hashlib
import http.cookiejar
import json
import os
import secrets
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections import Counter
from datetime import datetime, timezone
from html.parser import HTMLParser
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from api import (GET_NS, LEASES, WRK_MISSING, Result, print_results, run_wrk, seed_leases,  # noqa: E402
                 summarise_gil, to_result)
from common import ROOT, BenchServer, find_pyspy, machine, print_targets, read_collapsed, request  # noqa: E402

GROUP = "bench-viewers"
PERSON = "bench"
LEASE = LEASES.format(ns=GET_NS) + "/lease-0"

MIN_RATE_RATIO = 0.9    # JWT req/s / kubedash-token req/s
MAX_P99_RATIO = 1.2     # JWT p99 / kubedash-token p99


# ---------------------------------------------------------------------------------------------
# The identity provider and its ID token


def start_provider(work: Path, redirect_base: str):
    """tests/oidc_provider.py's provider, with one person in GROUP."""
    if not shutil.which("node") or not (ROOT / "tests" / "oidc" / "node_modules" / "oidc-provider").is_dir():
        raise SystemExit("needs node and the test provider: cd tests/oidc && npm ci")
    sys.path.insert(0, str(ROOT / "tests"))
    sys.path.insert(0, str(ROOT))
    from oidc_provider import OidcProvider   # (imports dashboard.access.tls: no Django set-up needed)

    provider = OidcProvider(work, redirect_base=redirect_base)
    provider.set_person(PERSON, email="bench@example.test", name="Bench Viewer", groups=[GROUP])
    provider.start()
    return provider


class _Form(HTMLParser):
    """The first <form> of a page: its action and its named inputs' values."""

    def __init__(self):
        super().__init__()
        self.action, self.fields, self._inside = None, {}, False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form" and self.action is None:
            self.action, self._inside = a.get("action") or "", True
        elif tag == "input" and self._inside and a.get("name"):
            self.fields[a["name"]] = a.get("value") or ""

    def handle_endtag(self, tag):
        if tag == "form":
            self._inside = False


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def id_token(provider, login: str) -> str:
    """An ID token for `login` by the authorization code flow with PKCE, as kubelogin gets one:
    the provider's login and consent forms are filled in over HTTP (any password)."""
    context = ssl.create_default_context(cafile=provider.ca_file)
    opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=context), _NoRedirect,
                                         urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    client = provider.config["clients"][0]
    redirect_uri = client["redirect_uris"][0]
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    url = provider.discovery["authorization_endpoint"] + "?" + urllib.parse.urlencode({
        "client_id": client["client_id"], "response_type": "code", "redirect_uri": redirect_uri,
        "scope": "openid email profile groups", "state": secrets.token_urlsafe(8),
        "nonce": secrets.token_urlsafe(8), "code_challenge": challenge, "code_challenge_method": "S256"})
    body = None
    for _ in range(12):
        try:
            with opener.open(urllib.request.Request(url, data=body), timeout=10) as resp:
                page = resp.read().decode()
                form = _Form()
                form.feed(page)
                if form.action is None:
                    raise SystemExit(f"no form on the provider's page {url}:\n{page[:500]}")
                fields = dict(form.fields)
                if "login" in fields:
                    fields.update(login=login, password="any")
                url, body = urllib.parse.urljoin(url, form.action), urllib.parse.urlencode(fields).encode()
        except urllib.error.HTTPError as answer:
            if answer.code not in (302, 303):
                raise SystemExit(f"the provider answered {answer.code} at {url}: {answer.read()[:500]!r}") from None
            url, body = urllib.parse.urljoin(url, answer.headers["Location"]), None
        if url.startswith(redirect_uri):
            break
    else:
        raise SystemExit("the provider never redirected back with a code")
    code = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)["code"][0]
    basic = base64.b64encode(f"{client['client_id']}:{client['client_secret']}".encode()).decode()
    exchange = urllib.request.Request(
        provider.discovery["token_endpoint"], headers={"Authorization": "Basic " + basic},
        data=urllib.parse.urlencode({"grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri,
                                     "code_verifier": verifier}).encode())
    with opener.open(exchange, timeout=10) as resp:
        return json.load(resp)["id_token"]


# ---------------------------------------------------------------------------------------------
# The server under test


class JwtServer(BenchServer):
    """BenchServer with KUBEDASH_AUTHENTICATION_CONFIG for the provider, GROUP bound to viewer and
    a kubedash viewer token (`viewer_token`) beside the admin token."""

    def __init__(self, data_dir: Path, provider):
        super().__init__(data_dir)
        from oidc_provider import authentication_config

        config = data_dir / "authentication.yaml"
        config.write_text(authentication_config(provider))
        self.env["KUBEDASH_AUTHENTICATION_CONFIG"] = str(config)
        self.viewer_token = ""

    def prepare(self) -> None:
        super().prepare()
        self.manage("group", "bind", GROUP, "--role", "viewer")
        self.viewer_token = self.manage("issue_token", "bench-viewer", "--role", "viewer").strip().splitlines()[-1]


# ---------------------------------------------------------------------------------------------
# Profiling (optional)

PRINCIPAL = "principal (dashboard/access/jwt_authn.py"
JWT_CHECKPOINTS = [  # inclusive: share of GIL samples whose stack passes through the frame
    ("bearer_principal (all of authentication)", ("bearer_principal (",)),
    ("  jwt_authn.principal", (PRINCIPAL,)),
    ("    identity (cache lookup: sha256 + dict)", ("identity (dashboard/access/jwt_authn.py",)),
    ("    verify (signature; should be ~0 once cached)", ("verify (dashboard/access/jwt_authn.py",)),
    ("    rights query (SQL: user grant + group bindings)", ("CursorWrapper.execute", "cursor (")),
    ("    widest (principal from grants)", ("widest (",)),
    ("  token_principal (kubedash token lookup)", ("token_principal (",)),
]


def jwt_path(raw: Path) -> list[str]:
    """Inclusive % of GIL samples through each JWT_CHECKPOINTS frame (the indented ones: only
    within jwt_authn.principal)."""
    total, through = 0, Counter()
    for stack, n in read_collapsed(raw):
        total += n
        inside = any(PRINCIPAL in frame for frame in stack)
        for label, keys in JWT_CHECKPOINTS:
            if (inside or not label.startswith("    ")) and any(k in frame for frame in stack for k in keys):
                through[label] += n
    return [f"  {100 * through[label] / max(total, 1):5.1f}%  {label}" for label, _ in JWT_CHECKPOINTS]


def profile_jwt(wrk: str, server: JwtServer, token: str, connections: int, seconds: float, out: Path) -> str:
    pyspy = find_pyspy()
    if pyspy is None:
        return "py-spy not found: install it with `.venv/bin/pip install py-spy` to profile"
    holder: dict = {}
    load = threading.Thread(target=lambda: holder.update(r=run_wrk(wrk, server, LEASE, connections, seconds + 3,
                                                                   token=token)))
    load.start()
    time.sleep(1)
    spy = subprocess.run([pyspy, "record", "--pid", str(server.proc.pid), "--duration", f"{seconds:g}",
                          "--rate", "200", "--format", "raw", "--output", str(out), "--gil"],
                         capture_output=True, text=True, timeout=seconds + 60)
    load.join()
    if spy.returncode != 0 or not out.exists():
        return f"py-spy failed (exit {spy.returncode}): {spy.stderr.strip()[-500:]}"
    lines = [f"raw stacks: {out}", summarise_gil(out, seconds, 200), "JWT path, inclusive % of GIL samples:",
             *jwt_path(out)]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------


def combine(name: str, runs: list[Result]) -> Result:
    """Totals of several runs of one kind: rate over the summed time; p50/p99 the runs' median
    (wrk gives percentiles per run only)."""
    seconds = sum(r.extra["duration_us"] for r in runs) / 1e6
    ok = sum(r.rate * r.extra["duration_us"] / 1e6 for r in runs)
    return Result(name, runs[0].connections, ok / seconds, statistics.median(r.p50_ms for r in runs),
                  statistics.median(r.p99_ms for r in runs), sum(r.non_2xx for r in runs), sum(r.errors for r in runs),
                  sum(r.cpu * r.extra["duration_us"] for r in runs) / (seconds * 1e6),
                  other_cpu=max(r.other_cpu for r in runs))


def cpu_ms(r: Result) -> float:
    return 1000 * r.cpu / r.rate if r.rate else float("inf")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=5, help="seconds per wrk run (default 5)")
    parser.add_argument("--connections", type=int, default=4, help="connections (= wrk threads), default 4")
    parser.add_argument("--rounds", type=int, default=2, help="A B pairs (default 2: A B A B)")
    parser.add_argument("--profile", type=Path, default=None,
                        help="also profile the server with py-spy during one more JWT run (raw stacks to FILE)")
    parser.add_argument("--strict", action="store_true", help="exit 1 if a target is missed")
    args = parser.parse_args(argv)
    wrk = shutil.which("wrk")
    if wrk is None:
        print(WRK_MISSING, file=sys.stderr)
        return 2

    print(f"kubedash bearer JWT benchmark  {datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC}")
    print(f"machine: {machine()}; database: SQLite; one worker")
    print(f"GET one Lease, {args.connections} connections, wrk runs of {args.duration:g} s, "
          f"{args.rounds} x (kubedash token, ID token)\n")
    work = Path(tempfile.mkdtemp(prefix="kubedash-bench-jwt-"))
    (work / "server").mkdir()
    server = provider = None
    try:
        # (the redirect back is caught by id_token(): no kubedash page is involved)
        provider = start_provider(work / "provider", "http://127.0.0.1")
        server = JwtServer(work / "server", provider)
        token = id_token(provider, PERSON)
        claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
        print(f"provider {provider.issuer} (pid {provider.proc.pid}); ID token for {claims.get('email')}, "
              f"groups {claims.get('groups')}, {len(token)} bytes, expires in {claims['exp'] - time.time():.0f} s")
        server.start()
        print(f"server: manage.py serve, pid {server.proc.pid}, http://127.0.0.1:{server.port}  (data {work})")
        seed_leases(server, GET_NS, ["lease-0"])
        tokens = {"kubedash token": server.viewer_token, "ID token (JWT)": token}
        for kind, t in tokens.items():   # both are accepted, and the JWT's first verification is done
            status, data = request(server.port, "GET", LEASE, headers={"Authorization": "Bearer " + t})
            if status != 200:
                raise SystemExit(f"GET with the {kind} answered {status}: {data[:300]!r}")
            run_wrk(wrk, server, LEASE, 2, 1, token=t)   # warm-up

        runs: dict[str, list[Result]] = {kind: [] for kind in tokens}
        first = True
        for _ in range(args.rounds):
            for kind, t in tokens.items():
                data, cpu = run_wrk(wrk, server, LEASE, args.connections, args.duration, token=t)
                result = to_result(kind, args.connections, data, cpu)
                runs[kind].append(result)
                print_results([result], header=first)
                first = False
        base, jwt = (combine(kind, rs) for kind, rs in runs.items())
        jwt.ratio = jwt.rate / base.rate if base.rate else None
        base.ratio = 1.0
        print("\n== totals (req/s over all runs of a kind; p50/p99: the runs' median; 'x ceiling': x kubedash token) ==")
        print_results([base, jwt])
        profile = ""
        if args.profile:
            print(f"\nprofiling the server with py-spy for {args.duration:g} s under the JWT load ...")
            profile = profile_jwt(wrk, server, token, args.connections, args.duration, args.profile)
    finally:
        if server is not None:
            server.stop()
        if provider is not None:
            provider.stop()
        shutil.rmtree(work, ignore_errors=True)
    if profile:
        print(profile)

    p99_ratio = jwt.p99_ms / base.p99_ms if base.p99_ms else float("inf")
    missed = print_targets([
        (f"JWT req/s >= {MIN_RATE_RATIO} x kubedash token", f"{jwt.ratio or 0:.2f}x", (jwt.ratio or 0) >= MIN_RATE_RATIO),
        (f"JWT p99 <= {MAX_P99_RATIO} x kubedash token",
         f"{jwt.p99_ms:.1f}/{base.p99_ms:.1f} ms = {p99_ratio:.2f}x", p99_ratio <= MAX_P99_RATIO),
        # Server CPU per request: the figure least moved by other work sharing the machine.
        ("JWT CPU ms/request vs kubedash token (reported)", f"{cpu_ms(jwt):.2f}/{cpu_ms(base):.2f} ms = "
         f"{cpu_ms(jwt) / cpu_ms(base) if cpu_ms(base) else float('inf'):.2f}x", None),
        ("non-2xx, errors == 0", f"{base.non_2xx + jwt.non_2xx}, {base.errors + jwt.errors}",
         base.non_2xx + jwt.non_2xx + base.errors + jwt.errors == 0),
    ], 48, 26)
    busiest = max(r.other_cpu for rs in runs.values() for r in rs)
    if busiest > 0.25:
        print(f"\nnote: other processes used up to {busiest:.2f} of the {os.cpu_count()} cores during the wrk runs; "
              "the machine was shared, so the absolute figures are pessimistic (the A B interleaving keeps the ratio fair)")
    return 1 if (args.strict and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
