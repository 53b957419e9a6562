"""The endpoints controller: each EndpointsController keeps one Service's Endpoints, whose
Backends (pods on NODES) come and go and turn ready / not ready."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from dashboard.core.strategy import make_subset
from dashboard.demo import MANAGED_BY, MANAGER

if TYPE_CHECKING:
    from dashboard.demo.timeline import Timeline

ENDPOINTS = "/api/v1/namespaces/{ns}/endpoints"

NODES = ["node-a", "node-b", "node-c", "node-d"]


@dataclass
class Backend:
    """A pod behind the Service, as its Endpoints address shows it."""
    name: str
    ip: str
    node: str
    uid: str
    ready: bool


class EndpointsController:
    """One Service's Endpoints: pods come and go and turn ready / not ready; each change
    is a PUT of the whole object (as the controller's Update), retried after a 409."""

    def __init__(self, sim: Timeline, namespace: str, name: str, ports: list[tuple[str, int]], *,
                 sizes: tuple[int, int], kind: str, subnet: int):
        self.sim = sim
        self.namespace = namespace
        self.name = name
        self.path = ENDPOINTS.format(ns=namespace) + "/" + name
        self.ports = ports
        self.low, self.high = sizes
        self.kind = kind                # deployment | statefulset | external
        self.subnet = subnet
        self.next_host = 10
        self.ordinal = 0
        self.replicaset_hash = self._suffix(9, "0123456789bcdfghjklmnpqrstvwxz")
        self.backends: list[Backend] = []
        self.observed: dict | None = None
        for _ in range(sim.rng.randint(self.low, max(self.low, self.high - 2))):
            self._add(ready=sim.rng.random() < 0.8)

    def _suffix(self, n: int, alphabet: str = "bcdfghjklmnpqrstvwxz2456789") -> str:
        return "".join(self.sim.rng.choice(alphabet) for _ in range(n))

    def _uid(self) -> str:
        h = f"{self.sim.rng.getrandbits(128):032x}"
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:]}"

    def _add(self, ready: bool) -> None:
        node_index = self.sim.rng.randrange(len(NODES))
        if self.kind == "statefulset":
            name = f"{self.name}-{self.ordinal}"
            self.ordinal += 1
        else:
            name = f"{self.name}-{self.replicaset_hash}-{self._suffix(5)}"
        if self.kind == "external":
            ip = f"192.168.{self.subnet}.{self.next_host}"
        else:
            ip = f"10.244.{node_index * 8 + self.subnet}.{self.next_host}"
        self.next_host = self.next_host + 1 if self.next_host < 250 else 10
        self.backends.append(Backend(name, ip, NODES[node_index], self._uid(), ready))

    def _address(self, b: Backend) -> dict:
        if self.kind == "external":
            return {"ip": b.ip}        # hand-made Endpoints for something outside the cluster
        address = {"ip": b.ip, "nodeName": b.node,
                   "targetRef": {"kind": "Pod", "namespace": self.namespace, "name": b.name, "uid": b.uid}}
        if self.kind == "statefulset":
            address["hostname"] = b.name
        return address

    def manifest(self) -> dict:
        subset = make_subset([self._address(b) for b in self.backends if b.ready],
                             [self._address(b) for b in self.backends if not b.ready],
                             [{"name": n, "port": p, "protocol": "TCP"} for n, p in self.ports])
        meta = {"name": self.name, "namespace": self.namespace,
                "labels": {MANAGED_BY: MANAGER, "app.kubernetes.io/name": self.name}}
        if self.observed:
            meta["resourceVersion"] = self.observed["metadata"]["resourceVersion"]
        return {"apiVersion": "v1", "kind": "Endpoints", "metadata": meta, "subsets": [subset]}

    def start(self) -> None:
        self.sim.after(self.sim.uniform(0.0, 1.0), self.publish_first)

    def publish_first(self) -> None:
        resp = self.sim.client.call("GET", self.path, what="endpoints", expect=(404,))
        self.observed = resp.body if resp.ok else None
        self._publish()
        self._schedule()

    def _schedule(self) -> None:
        self.sim.after(self.sim.uniform(1.0, 3.0), self.tick)

    def tick(self) -> None:
        self.change()
        self._publish()
        self._schedule()

    def change(self) -> None:
        """One thing happens to the pods behind the service."""
        rng, backends = self.sim.rng, self.backends
        roll = rng.random()
        if roll < 0.08 and len(backends) < self.high:
            self._add(ready=False)                                   # scale up: starts not ready
        elif roll < 0.16 and len(backends) > self.low:
            not_ready = [b for b in backends if not b.ready]
            backends.remove(rng.choice(not_ready or backends))       # scale down
        elif roll < 0.22 and self.kind == "deployment":
            backends.remove(rng.choice(backends))                    # a pod replaced
            self._add(ready=False)
        else:
            ready = [b for b in backends if b.ready]
            not_ready = [b for b in backends if not b.ready]
            # Mostly healthy: a not-ready pod is likelier to recover than a ready one to fail.
            if not_ready and (not ready or rng.random() < 0.6):
                rng.choice(not_ready).ready = True
            else:
                failing = rng.choice(ready)
                failing.ready = False
                self._probe_failed(failing)

    def _probe_failed(self, b: Backend) -> None:
        """The kubelet on the pod's node reports the failed readiness probe on the Pod (the
        Endpoints' target): a Warning Unhealthy Event (a real node, so none for external ones)."""
        if self.kind == "external":
            return
        port = self.ports[0][1]
        self.sim.record({"kind": "Pod", "namespace": self.namespace, "name": b.name, "uid": b.uid, "apiVersion": "v1"},
                        "Warning", "Unhealthy",
                        f"Readiness probe failed: Get \"http://{b.ip}:{port}/ready\": context deadline exceeded",
                        component="kubelet", host=b.node, field_path=f"spec.containers{{{self.name}}}")

    def _publish(self) -> None:
        resp = self.sim.client.call("PUT", self.path, self.manifest(), what="endpoints")
        if resp.status == 409:
            # Someone else wrote it: read the current version and write ours over it.
            fresh = self.sim.client.call("GET", self.path, what="endpoints", expect=(404,))
            self.observed = fresh.body if fresh.ok else None
            resp = self.sim.client.call("PUT", self.path, self.manifest(), what="endpoints")
        if resp.ok:
            self.observed = resp.body
        elif resp.status != 0:
            self.observed = None       # start again from a fresh GET-less create-or-replace

    def recover(self) -> None:
        self._schedule()
