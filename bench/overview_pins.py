"""The Overview's Pinned panel on the live hot path (review of issue 40), in-process.

    .venv/bin/python bench/overview_pins.py [--namespaces 20] [--pins 6] [--runs 9] [--loops 40]
    .venv/bin/py-spy record -r 500 -f raw -o /tmp/pins.txt -- .venv/bin/python bench/overview_pins.py --runs 30

Makes a throw-away SQLite database (temp data dir, migrated), one Lease in each of N
namespaces, a viewer with no pins and one with P pinned Leases (one of them deleted since), and
times with the process's CPU clock what an open Overview socket costs the server:
  push:  one Overview push (live.render_changes) for a write to a Lease nobody pinned, per
         socket of each viewer; ceiling: the same push with no other app's panels
         (live.OVERVIEW_PANELS emptied);
  beat:  one heartbeat's panels (live.clusters_fragment), per socket of each viewer; ceiling:
         the same with no other app's panels (no cluster followed: it is then empty).
Prints the median CPU ms of each (runs of `loops` calls) and each one's ratio to its ceiling.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from table import setup   # (an in-process Django on SQLite in data_dir, migrated: table.py's)


def lease(ns: str, name: str) -> dict:
    from dashboard.kube.meta import now

    renewed = now().strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name, "namespace": ns},
            "spec": {"holderIdentity": "node-a", "leaseDurationSeconds": 3600, "renewTime": renewed}}


def socket_of(user):
    from dashboard.access.principals import principal_for
    from dashboard.web.live_page import PageSocket, PageView

    principal = principal_for(user)
    s = PageSocket()
    s.principal, s.view = principal, PageView.parse(b"view=overview").for_viewer(principal)
    return s


def cpu_ms(fn, loops: int) -> float:
    start = time.process_time()
    for _ in range(loops):
        fn()
    return (time.process_time() - start) * 1000 / loops


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--namespaces", type=int, default=20)
    ap.add_argument("--pins", type=int, default=6)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--loops", type=int, default=40)
    args = ap.parse_args()
    setup(tempfile.mkdtemp(prefix="kubedash-bench-pins-"))

    import orjson

    from dashboard.access.tokens import ensure_user
    from dashboard.kube import store
    from dashboard.kube.hub import LogEntry
    from dashboard.kube.meta import now
    from dashboard.kube.registry import by_kind
    from dashboard.kube.revlog import MODIFIED
    from dashboard.saved.models import Pin
    from dashboard.web import live

    leases = by_kind("Lease")
    for i in range(args.namespaces):
        store.create(leases, f"bench-{i:03}", lease(f"bench-{i:03}", "lock"))
    unpinned = store.create(leases, "bench-000", lease("bench-000", "busy")).object
    quiet, pinner = ensure_user("bench-no-pins", "viewer"), ensure_user("bench-pins", "viewer")
    for i in range(args.pins):
        Pin.objects.create(user=pinner, kind="Lease", namespace=f"bench-{i:03}", name="lock")
    store.delete(leases, "bench-000", "lock")   # one pinned object deleted: "deleted … ago"
    entry = LogEntry(int(unpinned["metadata"]["resourceVersion"]), "Lease", "bench-000", "busy", MODIFIED,
                     orjson.dumps(unpinned).decode())
    pending = {("Lease", "bench-000", "busy"): (MODIFIED, entry)}
    sockets = {"no pins": socket_of(quiet), f"{args.pins} pins": socket_of(pinner)}
    panels = list(live.OVERVIEW_PANELS)

    def without_panels(fn):
        def run():
            live.OVERVIEW_PANELS[:] = []
            try:
                fn()
            finally:
                live.OVERVIEW_PANELS[:] = panels
        return run

    cases = {}
    for who, s in sockets.items():
        cases[f"push, {who}"] = lambda s=s: live.render_changes(s, dict(pending))
        cases[f"beat, {who}"] = lambda s=s: live.clusters_fragment(s, now())
    s = sockets["no pins"]
    cases["push ceiling"] = without_panels(lambda: live.render_changes(s, dict(pending)))
    cases["beat ceiling"] = without_panels(lambda: live.clusters_fragment(s, now()))
    for fn in cases.values():   # warm the template and query caches
        fn()
    found = {name: [] for name in cases}
    for _ in range(args.runs):   # interleaved: every case once per run
        for name, fn in cases.items():
            found[name].append(cpu_ms(fn, args.loops))
    median = {name: statistics.median(v) for name, v in found.items()}
    print(f"{args.namespaces} namespaces, {args.runs} runs of {args.loops} calls, CPU ms per call (median, min-max)")
    for name, values in found.items():
        ceiling = median["push ceiling" if name.startswith("push") else "beat ceiling"]
        ratio = "" if "ceiling" in name else f"  {median[name] / ceiling:5.2f}x the ceiling" if ceiling > 0.001 else ""
        print(f"  {name:16} {median[name]:8.3f} ms  ({min(values):.3f}-{max(values):.3f}){ratio}")


if __name__ == "__main__":
    main()
