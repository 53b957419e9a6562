"""Adding and removing followed clusters (the `follow` command and the clusters page call these),
and the API client the follower reaches a cluster with.

Adding one only records it: the kubeconfig reduced to one context (follow/upstream_kubeconfig.py),
stored encrypted (follow/secrets.py). Nothing contacts the cluster here; the follower
(follow/informer.py) does, and reports how it goes in the Cluster row's state.
"""
from __future__ import annotations

import json
from pathlib import Path

from django.db import IntegrityError, transaction

from dashboard.access import clusters as access_clusters
from dashboard.kube import mirror
from dashboard.kube.validation import is_dns1123_label

from . import secrets, upstream_kubeconfig
from .models import Cluster, UserCredentials


def check_name(name: str) -> str:
    """The name, if a new cluster may have it; else ValueError in plain words."""
    name = (name or "").strip()
    if not name:
        raise ValueError("a cluster needs a name")
    if name == access_clusters.LOCAL:
        raise ValueError(f"{name!r} is the name of kubedash's own objects: choose another name")
    if not access_clusters.NAME_RE.match(name):
        raise ValueError(f"{name!r} is not a valid cluster name: at most 63 lower-case letters, digits and '-', "
                         "starting and ending with a letter or digit (e.g. 'prod-eu')")
    if Cluster.objects.filter(name=name).exists():
        raise ValueError(f"a cluster named {name!r} is already followed")
    return name


def check_namespace(namespace: str) -> str:
    namespace = (namespace or "").strip()
    if namespace and is_dns1123_label(namespace):
        raise ValueError(f"{namespace!r} is not a valid namespace name: lower-case letters, digits and '-'")
    return namespace


def check_writes(mode: str) -> str:
    mode = (mode or "").strip()
    if mode not in Cluster.WRITE_MODES:
        raise ValueError(f"{mode!r} is not a write mode: use one of {', '.join(Cluster.WRITE_MODES)}")
    return mode


def add(name: str, kubeconfig_text: str, *, context: str | None = None, namespace: str = "",
        base_dir: Path | None = None, writes: str = Cluster.READ_ONLY) -> Cluster:
    """Follow a cluster: validate, reduce the kubeconfig, store it encrypted. `namespace` ""
    follows every namespace. `base_dir`: where the kubeconfig's relative file references
    are read from; None refuses file references (upstream_kubeconfig.reduce). Raises ValueError
    (upstream_kubeconfig.KubeconfigError for the kubeconfig and context) with a plain message."""
    name = check_name(name)
    namespace = check_namespace(namespace)
    writes = check_writes(writes)
    reduced = upstream_kubeconfig.reduce(kubeconfig_text, context=context, base_dir=base_dir)
    credentials = secrets.encrypt(json.dumps(reduced.config, separators=(",", ":")).encode())
    try:
        with transaction.atomic():
            return Cluster.objects.create(name=name, server=reduced.server, context=reduced.context,
                                          namespace=namespace, credentials=credentials, writes=writes)
    except IntegrityError:
        raise ValueError(f"a cluster named {name!r} is already followed") from None


def set_writes(name: str, mode: str) -> Cluster:
    """Choose how the dashboard's writes reach a followed cluster (follow/writes.py)."""
    mode = check_writes(mode)
    if not Cluster.objects.filter(name=name).update(writes=mode):
        raise ValueError(f"no followed cluster is named {name!r}")
    return Cluster.objects.get(name=name)


def save_user_credentials(cluster: Cluster, user, kubeconfig_text: str, *, context: str | None = None) -> None:
    """Store a user's own kubeconfig for `cluster` (own-credentials mode): the same rules as the
    cluster's (one context, no files, no exec), encrypted, replacing any earlier one. It must
    name the cluster's own server: what upstream answers a write is mirrored into the copy every
    viewer sees, so it must come from that cluster."""
    reduced = upstream_kubeconfig.reduce(kubeconfig_text, context=context, base_dir=None)
    if reduced.server.rstrip("/") != cluster.server.rstrip("/"):
        raise upstream_kubeconfig.KubeconfigError(f"the kubeconfig's server is not {cluster.name}'s ({cluster.server}): "
                                          "use a context for that cluster", "context")
    credentials = secrets.encrypt(json.dumps(reduced.config, separators=(",", ":")).encode())
    UserCredentials.objects.update_or_create(user=user, cluster=cluster, defaults={"credentials": credentials})


def remove(name: str) -> int:
    """Stop following `name` and delete its objects from the store; how many were deleted."""
    deleted, _ = Cluster.objects.filter(name=name).delete()
    if not deleted:
        raise ValueError(f"no followed cluster is named {name!r}")
    return mirror.forget(name)


def credentials(cluster: Cluster) -> dict:
    """The cluster's reduced kubeconfig (decrypted; secrets.CredentialsError under another key)."""
    return json.loads(secrets.decrypt(bytes(cluster.credentials)))


def cluster_api_client(cluster: Cluster):
    """A kubernetes.client.ApiClient for the cluster, from its stored credentials."""
    return upstream_kubeconfig.api_client(credentials(cluster))
