"""The API's URL paths as the rest of the project needs to recognise them (the server's lanes
and request limits, the pages' scope), named once here.

API_ROOTS: the prefixes of every path the Kubernetes API (and its health and metrics
endpoints) answers; anything else is a page, a form or a static file.
CLUSTER_API_PATH: /clusters/<name>/api…, a followed cluster's copy through the same API
(server/cluster_paths.py strips the prefix): group 1 the cluster's name, group 2 the API path.
"""
from __future__ import annotations

import re

API_ROOTS = ("/api", "/apis", "/openapi", "/healthz", "/livez", "/readyz", "/version", "/metrics")
CLUSTER_API_PATH = re.compile(r"^/clusters/([^/]+)(/(?:api|apis|openapi|version)(?:/.*)?)$")
