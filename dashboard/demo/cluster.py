"""The demo cluster: a Timeline with its cast — leader elections, Endpoints controllers and the
job controller, spread over the namespaces."""
from __future__ import annotations

from dashboard.demo.client import Client
from dashboard.demo.endpoints import EndpointsController
from dashboard.demo.jobs import JobController
from dashboard.demo.leases import Election
from dashboard.demo.timeline import Timeline


class Simulation(Timeline):
    """The whole demo: `setup()` casts the actors, `run()` plays them."""

    def __init__(self, client: Client, namespaces: list[str], **options):
        super().__init__(client, namespaces, **options)
        self.elections: list[Election] = []
        self.services: list[EndpointsController] = []
        self.jobs = JobController(self)

    def setup(self) -> None:
        """The cast: elections, services and the job controller, spread over the namespaces."""
        self.elections = [
            Election(self, self.namespace(0), "kube-scheduler",
                     ["control-plane-1", "control-plane-2", "control-plane-3"], tenure=(40, 150)),
            Election(self, self.namespace(0), "kube-controller-manager",
                     ["control-plane-1", "control-plane-2", "control-plane-3"], tenure=(40, 150)),
            Election(self, self.namespace(1), "payments-api-leader",
                     ["payments-api-7c9d8f-x2lkp", "payments-api-7c9d8f-q8zrt"], tenure=(20, 90)),
            # An operator that flaps: the page always has a takeover to show.
            Election(self, self.namespace(2), "batch-operator",
                     ["batch-operator-5b8d-tw9cm", "batch-operator-5b8d-hk4vz", "batch-operator-5b8d-m7q2x"],
                     tenure=(8, 25)),
        ]
        self.services = [
            EndpointsController(self, self.namespace(0), "web", [("http", 80), ("https", 443)],
                                sizes=(3, 8), kind="deployment", subnet=1),
            EndpointsController(self, self.namespace(1), "payments",
                                [("grpc", 9090), ("http", 8080), ("metrics", 9100)],
                                sizes=(3, 6), kind="deployment", subnet=2),
            EndpointsController(self, self.namespace(0), "search", [("http", 9200), ("transport", 9300)],
                                sizes=(3, 5), kind="statefulset", subnet=3),
            EndpointsController(self, self.namespace(2), "ledger-db", [("postgres", 5432)],
                                sizes=(3, 4), kind="external", subnet=4),
        ]
        for actor in [*self.elections, *self.services, self.jobs]:
            actor.start()
