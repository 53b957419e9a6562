"""Every column is at least as wide as validation allows, on both databases (issue 29: a
holderIdentity over 253 characters was a 500 on PostgreSQL, which enforces varchar lengths,
and fine on SQLite, which does not).

1. Every bounded text column of kubedash's models is walked: each must be declared below with
   the limit that bounds what reaches it (the API's validation, a form, a server-set value), and
   be at least that wide. A new column fails here until it is declared.
2. The longest values validation allows are written through the real API of a server on
   PostgreSQL (create, patch, server-side apply, a followed cluster's kubeconfig): never a 5xx.
"""
from __future__ import annotations

import json

import pytest

import pg_support
from conftest import served, server_env

# (app_label.Model, field) -> (the longest value that can reach it, what bounds it). None: not
# a bounded column (text). Inherited ObjectRow fields are declared once per concrete model.
OBJECT_ROW = {
    "cluster": (63, "access.clusters.NAME_RE (a DNS label)"),
    "namespace": (63, "ObjectMeta: namespace is a DNS label"),
    "name": (253, "ObjectMeta: name is at most a DNS subdomain"),
    "uid": (36, "server-set UUID; follow/admit.py MAX_UID for followed objects"),
}
BOUNDS = {
    "kube.Revision": {"cluster": OBJECT_ROW["cluster"], "kind": (63, "the registry's kinds"),
                      "namespace": OBJECT_ROW["namespace"], "name": OBJECT_ROW["name"], "type": (8, "ADDED/MODIFIED/DELETED"),
                      "upstream_rv": (64, "follow/admit.py MAX_RESOURCE_VERSION")},
    "kube.RevisionPack": {"cluster": OBJECT_ROW["cluster"], "kind": (63, "the registry's kinds"),
                          "namespace": OBJECT_ROW["namespace"], "name": OBJECT_ROW["name"]},
    "coordination.Lease": {**OBJECT_ROW},   # holder_identity: text (free-form, unbounded in kube)
    "core.Endpoints": {**OBJECT_ROW},
    "batch.Job": {**OBJECT_ROW, "completion_mode": (10, "NonIndexed | Indexed (validated)"),
                  "phase": (32, "batch/strategy.py: the computed phase's words")},
    "events.Event": {**OBJECT_ROW, **{column: (width, "events/strategy.typed_columns cuts it to the column")
                                      for column, width in (("involved_kind", 63), ("involved_namespace", 253),
                                                            ("involved_name", 253), ("involved_uid", 36),
                                                            ("type", 32), ("reason", 128))}},
    "access.Profile": {"role": (8, "Role.choices"),
                       "oidc_subject": (255, "OpenID Connect Core 5.1: `sub` is at most 255 ASCII characters")},
    "access.GroupBinding": {"group": (256, "access/bindings.py refuses longer"), "role": (8, "Role.choices")},
    "access.OidcSession": {"session_key": (40, "Django's session keys"),
                           "sid": (255, "access/oidc.remember_session keeps no longer sid"),
                           "subject": (255, "OpenID Connect Core 5.1: `sub` is at most 255 ASCII characters")},
    "saved.SavedView": {"name": (100, "saved/views.py cuts it"), "slug": (120, "SavedView.free_slug from the name"),
                        "path": (200, "saving.list_paths(): the Overview and the lists"),
                        "shared": (10, "SHARED_CHOICES")},
    "saved.DefaultView": {"path": (200, "saving.list_paths()")},
    "saved.Pin": {"cluster": OBJECT_ROW["cluster"], "kind": (63, "the registry's kinds"),
                  "namespace": OBJECT_ROW["namespace"], "name": OBJECT_ROW["name"]},
    "notifications.Channel": {"name": (63, "actions.py: a DNS label"), "shown": (32, "the scheme, the rest masked")},
    "notifications.Rule": {"name": (63, "actions.py: a DNS label"), "kind": (32, "the rule kinds"),
                           "cluster": OBJECT_ROW["cluster"], "namespace": OBJECT_ROW["namespace"],
                           "selector": (1000, "the form's / command's bound"), "reason": (500, "the form's / command's bound"),
                           "owner_group": (256, "a GroupBinding's group")},
    "notifications.Episode": {"cluster": OBJECT_ROW["cluster"], "kind": (32, "the registry's kinds"),
                              "namespace": OBJECT_ROW["namespace"], "name": OBJECT_ROW["name"]},
    "notifications.Outbox": {"message_id": (200, "messages.py: rule, episode and transition ids"),
                             "status": (10, "STATUSES"), "last_error": (32, "delivery.ERRORS")},
    "notifications.Notification": {"message_id": (200, "messages.py: rule, episode and transition ids")},
    "access.ApiToken": {"name": (100, "the form's / command's max_length"), "token_hash": (64, "sha256 hex")},
    "access.ShareLink": {"token_hash": (64, "sha256 hex"), "label": (100, "the form's max_length"),
                         "kind": (32, "the registry's kinds"), "namespace": OBJECT_ROW["namespace"],
                         "cluster": OBJECT_ROW["cluster"], "label_selector": (1000, "the form's max_length")},
    "access.AccessChange": {"subject": (64, "'user:<id>' / 'token:<id>' / 'share:<id>'")},
    "follow.Cluster": {"name": (63, "clusters.check_name (a DNS label)"), "server": (1000, "kubeconfig.MAX_SERVER"),
                       "context": (253, "kubeconfig.MAX_CONTEXT"), "namespace": (63, "clusters.check_namespace"),
                       "state": (8, "syncing / live / stale"),
                       "writes": (15, "read-only / as-user / own-credentials (Cluster.WRITE_MODES)"), "message": (1000, "truncated to 1000 where written")},
}


def test_every_bounded_column_is_declared_and_wide_enough():
    from django.apps import apps
    from django.db import models

    seen = set()
    for model in apps.get_models():
        label = f"{model._meta.app_label}.{model.__name__}"
        if not model.__module__.startswith("dashboard."):
            continue
        for field in model._meta.concrete_fields:
            if not isinstance(field, models.CharField) or field.max_length is None:
                continue
            declared = BOUNDS.get(label, {}).get(field.name)
            assert declared is not None, f"{label}.{field.name} (max_length {field.max_length}) is not declared here"
            limit, why = declared
            assert field.max_length >= limit, f"{label}.{field.name}: {field.max_length} < {limit} ({why})"
            seen.add((label, field.name))
    declared = {(label, name) for label, fields in BOUNDS.items() for name in fields}
    assert declared - seen == set(), "declared columns that are not bounded text columns any more"


@pytest.fixture(scope="module")
def pg_server(tmp_path_factory):
    pg_support.require_postgres()
    dbname = pg_support.create_database("kd_widths")
    data_dir = tmp_path_factory.mktemp("widths")
    try:
        with served(data_dir, env=server_env(data_dir, DATABASE_URL=pg_support.pg_url(dbname))) as server:
            yield server
    finally:
        pg_support.drop_database(dbname)


NS = "n" * 63
LONG_NAME = ".".join(["a" * 63] * 3) + "." + "b" * 61   # 253 characters, a valid DNS subdomain


def _ok(result, *codes):
    status, _, body = result
    assert status in codes, (status, str(body)[:500])
    return body


@pytest.mark.slow
@pytest.mark.postgres
def test_the_longest_valid_values_are_stored_on_postgresql(pg_server, tmp_path):
    assert len(LONG_NAME) == 253
    s = pg_server
    _ok(s.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
        201, 404, 405, 409)   # (namespaces are not a served kind: any namespace may be written to)
    leases = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases"
    holder = "h" * 20_000
    body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": LONG_NAME, "namespace": NS},
            "spec": {"holderIdentity": holder}}
    assert _ok(s.request("POST", leases, body), 201)["spec"]["holderIdentity"] == holder
    _ok(s.request("PATCH", f"{leases}/{LONG_NAME}", {"spec": {"holderIdentity": holder + "x"}},
                  content_type="application/merge-patch+json"), 200)
    applied = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "applied", "namespace": NS},
               "spec": {"holderIdentity": "a" * 5000}}
    _ok(s.request("PATCH", f"{leases}/applied?fieldManager=widths", json.dumps(applied).encode(),
                  content_type="application/apply-patch+yaml"), 200, 201)
    listed = _ok(s.request("GET", f"{leases}?fieldSelector=metadata.name={LONG_NAME}"), 200)
    assert listed["items"][0]["spec"]["holderIdentity"] == holder + "x"
    endpoints = {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": LONG_NAME, "namespace": NS},
                 "subsets": [{"addresses": [{"ip": "10.0.0.1", "hostname": "h" * 63}], "ports": [{"port": 80}]}]}
    _ok(s.request("POST", f"/api/v1/namespaces/{NS}/endpoints", endpoints), 201)
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j" * 63, "namespace": NS},
           "spec": {"completionMode": "NonIndexed", "template": {"spec": {"restartPolicy": "Never",
                    "containers": [{"name": "c" * 63, "image": "busybox"}]}}}}
    _ok(s.request("POST", f"/apis/batch/v1/namespaces/{NS}/jobs", job), 201)
    # A followed cluster with the longest context name and server URL it may have.
    context = "c" * 253
    server_url = "https://cluster.example.com/" + "p" * (1000 - len("https://cluster.example.com/"))
    config = {"apiVersion": "v1", "kind": "Config", "current-context": context,
              "clusters": [{"name": "c", "cluster": {"server": server_url}}],
              "users": [{"name": "u", "user": {"token": "t" * 4000}}],
              "contexts": [{"name": context, "context": {"cluster": "c", "user": "u", "namespace": NS}}]}
    path = tmp_path / "wide.kubeconfig"
    path.write_text(json.dumps(config))
    s.manage("follow", "add", "w" * 63, "--kubeconfig", str(path), "--namespace", NS)
    assert "w" * 63 in s.manage("follow", "list")
