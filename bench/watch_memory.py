"""Memory per idle watcher (issue 28): N idle watch streams on one server process, against the
floor of a bare asyncio server that holds the same N idle chunked responses, in the same run.

    .venv/bin/python bench/watch_memory.py [--watchers 10000] [--database postgres://…]

The server (one process, fd limit raised to the hard limit) is started with one Lease; a client
process opens N watches the way client-go's reflector does (`watch=true&resourceVersion=…&
allowWatchBookmarks=true&timeoutSeconds=…`: a third cluster-wide, the rest on one namespace),
waits until every one has its headers, and holds them idle. The server's RSS before and 3 s after
(no events: idle) gives the cost per watcher. The floor: the same client against a bare asyncio
HTTP server (no Django, no auth, no database) answering each GET with chunked headers and
holding the connection. Target: ≤ 16 KiB per idle watcher.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import BenchServer, add_backend_arguments, backend_name, free_port, machine, request  # noqa: E402
from watch import raise_fd_limit, rss_kb  # noqa: E402

TARGET_KIB = 16
LEASES = "/apis/coordination.k8s.io/v1"


async def _hold(port: int, token: str, paths: list[str]) -> None:
    """Open every watch (50 at a time), print READY ok failed, hold them until stdin closes."""
    loop = asyncio.get_running_loop()
    gate = asyncio.Semaphore(50)

    class Stream(asyncio.Protocol):
        def __init__(self, path: str, ready: asyncio.Future):
            self.path, self.ready, self.head = path, ready, b""

        def connection_made(self, transport):
            transport.write(f"GET {self.path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n"
                            f"Accept: application/json\r\nUser-Agent: kubedash-bench\r\n\r\n".encode())

        def data_received(self, data: bytes) -> None:
            if not self.ready.done():
                self.head += data
                if b"\r\n\r\n" in self.head:
                    self.ready.set_result(self.head.startswith(b"HTTP/1.1 200"))

        def connection_lost(self, exc):
            if not self.ready.done():
                self.ready.set_result(False)

    keep = []

    async def one(path: str) -> bool:
        ready = loop.create_future()
        async with gate:
            try:
                transport, _ = await loop.create_connection(lambda: Stream(path, ready), "127.0.0.1", port)
                keep.append(transport)
                return await asyncio.wait_for(ready, 120)
            except (OSError, asyncio.TimeoutError):
                return False

    results = await asyncio.gather(*(one(p) for p in paths))
    print(f"READY {sum(results)} {len(results) - sum(results)}", flush=True)
    await loop.run_in_executor(None, sys.stdin.readline)


async def _bare(port: int) -> None:
    """The floor: answer each request with chunked headers and hold the connection."""
    async def serve(reader, writer):
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        await reader.read()   # until the client goes

    server = await asyncio.start_server(serve, "127.0.0.1", port, backlog=4096)
    print("LISTENING", flush=True)
    async with server:
        await server.serve_forever()


def open_watchers(port: int, token: str, paths: list[str]) -> tuple[subprocess.Popen, int, int, float]:
    started = time.monotonic()
    child = subprocess.Popen([sys.executable, __file__, "_hold", str(port), token],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    child.stdin.write("\n".join(paths) + "\n\n")
    child.stdin.flush()
    line = child.stdout.readline().split()
    if not line or line[0] != "READY":
        raise SystemExit(f"the watch client failed: {line}")
    return child, int(line[1]), int(line[2]), time.monotonic() - started


def measure(pid: int, port: int, token: str, paths: list[str]) -> tuple[float, int, int, float]:
    """(KiB per open stream, opened, failed, seconds to open)."""
    time.sleep(1)
    before = rss_kb(pid)
    child, ok, failed, seconds = open_watchers(port, token, paths)
    time.sleep(3)
    after = rss_kb(pid)
    child.stdin.close()
    child.wait(30)
    return (after - before) / max(ok, 1), ok, failed, seconds


def main() -> int:
    if len(sys.argv) >= 2 and sys.argv[1] == "_hold":
        paths = []
        for line in sys.stdin:
            if not line.strip():
                break
            paths.append(line.strip())
        asyncio.run(_hold(int(sys.argv[2]), sys.argv[3], paths))
        return 0
    if len(sys.argv) >= 2 and sys.argv[1] == "_bare":
        asyncio.run(_bare(int(sys.argv[2])))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--watchers", type=int, default=10000)
    add_backend_arguments(parser)
    args = parser.parse_args()
    fd_limit = raise_fd_limit()
    print(f"# bench/watch_memory.py: {args.watchers} idle watchers, {backend_name(args.database, args.redis)}, "
          f"fd limit {fd_limit}\n# {machine()}; load average at start: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        server = BenchServer(Path(tmp), database=args.database, redis=args.redis)
        server.env["KUBEDASH_REQUEST_LOG"] = "0"
        try:
            server.start()
            import orjson
            status, body = request(server.port, "POST", f"{LEASES}/namespaces/default/leases", orjson.dumps(
                {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                 "metadata": {"name": "held", "namespace": "default"}, "spec": {"holderIdentity": "x"}}),
                {"Authorization": f"Bearer {server.token}", "Content-Type": "application/json"})
            rv = orjson.loads(body)["metadata"]["resourceVersion"]
            query = f"watch=true&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=3000"
            paths = [(f"{LEASES}/leases?{query}" if i % 3 == 0 else f"{LEASES}/namespaces/default/leases?{query}")
                     for i in range(args.watchers)]
            per, ok, failed, seconds = measure(server.serving_pids()[0], server.port, server.token, paths)
        finally:
            server.stop()
    port = free_port()
    bare = subprocess.Popen([sys.executable, __file__, "_bare", str(port)], stdout=subprocess.PIPE, text=True)
    try:
        bare.stdout.readline()
        floor, bare_ok, _, _ = measure(bare.pid, port, "-", ["/"] * args.watchers)
    finally:
        bare.terminate()
        bare.wait(10)
    print(f"# load average at end: {os.getloadavg()[0]:.2f}\n")
    print(f"kubedash: {ok} watchers open ({failed} failed) in {seconds:.1f} s: {per:.1f} KiB per idle watcher")
    print(f"floor (bare asyncio server, {bare_ok} idle chunked responses): {floor:.1f} KiB per connection")
    print(f"ratio {per / floor if floor > 0 else float('nan'):.1f}x the floor; target <= {TARGET_KIB} KiB: "
          f"{'PASS' if per <= TARGET_KIB else 'MISS'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
