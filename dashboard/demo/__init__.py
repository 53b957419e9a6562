"""The demo simulator: a small fake cluster that drives the API over HTTP, as real components do.

- Leader elections: candidates behave like client-go's leaderelection (renew the Lease they
  hold, take over one whose renewTime + leaseDurationSeconds has passed, release it on a
  clean shutdown); holders sometimes crash, so the Lease visibly expires before a takeover.
- Endpoints: an endpoints controller whose pods turn ready / not ready, scale up and down.
- Jobs: a job controller that creates Jobs and reports their pods through /status until
  they complete, fail or get suspended; finished Jobs are deleted after a while.

It is a plain HTTP client with a bearer token (no ORM, no store calls), so it exercises the
same validation, optimistic concurrency and watch fan-out as kubectl does. One thread and
one keep-alive connection: actors are callbacks on a virtual timeline (a heap), and the
loop sleeps until real time catches up with the next one. Every random choice comes from
one seeded RNG in timeline order, so `--seed` replays the same story.

Modules: client (HTTP and the tally), timeline (clock and loop), cluster (the Simulation:
the cast on a timeline), one actor module per kind (leases, endpoints, jobs; they reuse the
kind apps' rules, e.g. lease expiry and release); runner starts `manage.py simulate` for
`start`.
"""

# The label on everything the simulator writes, so a restart can find its own Jobs.
MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "kubedash-simulator"
