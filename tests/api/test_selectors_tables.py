"""Label/field selectors, Table responses and discovery documents (no Django DB needed).

The ORM pushdown test runs a throwaway SQLite database in a subprocess (and PostgreSQL
when KUBEDASH_TEST_POSTGRES_URL is set), so this process's Django settings stay untouched.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from dashboard.kube import discovery, errors, registry
from dashboard.kube import selectors as v   # v: test_label_selectors came from test_validation.py
from dashboard.kube.registry import Column, Resource
from dashboard.kube.selectors import (
    FieldSelector,
    LabelSelector,
    field_getter,
    label_selector_from_dict,
    parse_field_selector,
    parse_label_selector,
)
from dashboard.kube.formats import human_duration
from dashboard.kube.tables import (
    build_table,
    column_definitions,
    table_version,
    wants_table,
)
from conftest import ROOT
from rule_helpers import texts

NOW = datetime(2025, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
KUBECTL_TABLE_ACCEPT = ("application/json;as=Table;v=v1;g=meta.k8s.io,"
                        "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json")
KUBECTL_DISCOVERY_ACCEPT = ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
                            "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,"
                            "application/json")


def bad(fn, *args, **kw) -> str:
    with pytest.raises(errors.ApiError) as info:
        fn(*args, **kw)
    assert info.value.code == 400 and info.value.reason == "BadRequest"
    return info.value.message


# --------------------------------------------------------------------------- label selectors

@pytest.mark.parametrize("text, canonical", [
    ("a=b", "a=b"),
    ("a==b", "a==b"),
    ("a!=b", "a!=b"),
    ("a in (x,y)", "a in (x,y)"),
    ("a in (y,x,y)", "a in (x,y)"),
    ("a notin (x)", "a notin (x)"),
    ("a", "a"),
    ("!a", "!a"),
    ("a>5", "a>5"),
    ("a<5", "a<5"),
    ("  a = b ,\tc in ( x , y ) ", "a=b,c in (x,y)"),
    ("example.com/app=web", "example.com/app=web"),
    ("app.kubernetes.io/name=web,tier", "app.kubernetes.io/name=web,tier"),
    ("z=1,a=2", "a=2,z=1"),                        # sorted by key
    ("x in (foo,,baz),y,z notin ()", "x in (,baz,foo),y,z notin ()"),
    ("in in (in,notin)", "in in (in,notin)"),      # keywords are plain words as keys/values
    ("a=", "a="),
    ("a in (b,)", "a in (,b)"),
])
def test_label_selector_parses(text, canonical):
    sel = parse_label_selector(text)
    assert str(sel) == canonical
    assert str(parse_label_selector(str(sel))) == canonical   # canonical form re-parses


def test_empty_label_selector_matches_everything():
    for text in ("", None, "   "):
        sel = parse_label_selector(text)
        assert sel.empty and str(sel) == ""
        assert sel.matches({}) and sel.matches({"a": "b"}) and sel.matches(None)


@pytest.mark.parametrize("text, labels, expected", [
    ("a=b", {"a": "b"}, True),
    ("a=b", {"a": "c"}, False),
    ("a=b", {}, False),
    ("a==b", {"a": "b", "c": "d"}, True),
    ("a!=b", {}, True),                       # a missing key satisfies !=
    ("a!=b", {"a": "b"}, False),
    ("a!=b", {"a": "c"}, True),
    ("a in (x,y)", {"a": "y"}, True),
    ("a in (x,y)", {"a": "z"}, False),
    ("a in (x,y)", {}, False),
    ("a notin (x,y)", {}, True),
    ("a notin (x,y)", {"a": "x"}, False),
    ("a notin (x,y)", {"a": "z"}, True),
    ("a", {"a": ""}, True),
    ("a", {"b": "a"}, False),
    ("!a", {"b": "1"}, True),
    ("!a", {"a": ""}, False),
    ("a=", {"a": ""}, True),
    ("a=", {}, False),
    ("a in ()", {"a": ""}, True),
    ("n>5", {"n": "6"}, True),
    ("n>5", {"n": "5"}, False),
    ("n>5", {"n": "x"}, False),              # non-integer label values never compare
    ("n>5", {}, False),
    ("n<5", {"n": "-3"}, True),
    ("n<5", {"n": "10"}, False),
    ("a=b,c", {"a": "b", "c": "1"}, True),   # comma is AND
    ("a=b,c", {"a": "b"}, False),
    ("example.com/app=web", {"example.com/app": "web"}, True),
])
def test_label_selector_matches(text, labels, expected):
    assert parse_label_selector(text).matches(labels) is expected


QNAME_RULE = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
              "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', "
              "regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")


@pytest.mark.parametrize("text, message", [
    ("a in b", "unable to parse requirement: found 'b' expected: '('"),
    ("a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
    ("a in (b", "unable to parse requirement: found '', expected: ',' or ')'"),
    ("a in (b c)", "unable to parse requirement: found 'c', expected: ',' or ')'"),
    ("a=(b)", "unable to parse requirement: found '(', expected: identifier"),
    ("a,,b", "found ',', expected: identifier after ','"),
    ("a=b,", "found '', expected: identifier after ','"),
    ("=a", "found '=', expected: !, identifier, or 'end of string'"),
    ("(a)", "found '(', expected: !, identifier, or 'end of string'"),
    ("a=b c", "found 'c', expected: ',' or 'end of string'"),
    ("!a=b", "found '=', expected: ',' or 'end of string'"),
    ("a>x", "unable to parse requirement: values[0]: Invalid value: \"x\": "
            "for 'Gt', 'Lt' operators, the value must be an integer"),
    ("-a=b", 'unable to parse requirement: <nil>: Invalid value: "-a": name part ' + QNAME_RULE),
    ("a/b/c", 'unable to parse requirement: <nil>: Invalid value: "a/b/c": a qualified name '
              + QNAME_RULE + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"),
    ("a=b$", "unable to parse requirement: values[0][a]: Invalid value: \"b$\": a valid label must be an "
             "empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end "
             "with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
             "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"),
])
def test_label_selector_errors(text, message):
    assert bad(parse_label_selector, text) == message


def test_label_selector_key_and_value_limits():
    assert "prefix part a lowercase RFC 1123 subdomain" in bad(parse_label_selector, "Example.com/a=b")
    assert "prefix part must be non-empty" in bad(parse_label_selector, "/a")
    assert "name part must be no more than 63 characters" in bad(parse_label_selector, "k" * 64)
    assert "must be no more than 63 characters" in bad(parse_label_selector, "a=" + "v" * 64)
    parse_label_selector("k" * 63 + "=" + "v" * 63)           # the limits themselves are fine
    # gt/lt values must be integers AND label values, so negative bounds are rejected, as in kube.
    assert bad(parse_label_selector, "a<-5").startswith('unable to parse requirement: values[0][a]: '
                                                         'Invalid value: "-5": a valid label must be')


def test_label_selector_from_dict():
    assert label_selector_from_dict(None).matches({}) is False        # null selects nothing
    assert label_selector_from_dict(None).empty is False
    assert label_selector_from_dict({}).empty                          # {} selects everything
    sel = label_selector_from_dict({
        "matchLabels": {"job-name": "pi", "batch.kubernetes.io/controller-uid": "u1"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["a", "b"]},
            {"key": "env", "operator": "NotIn", "values": ["prod"]},
            {"key": "track", "operator": "Exists"},
            {"key": "canary", "operator": "DoesNotExist"},
        ],
    })
    good = {"job-name": "pi", "batch.kubernetes.io/controller-uid": "u1", "tier": "b", "track": ""}
    assert sel.matches(good)
    assert not sel.matches({**good, "canary": "1"})
    assert not sel.matches({**good, "env": "prod"})
    assert not sel.matches({**good, "tier": "c"})
    assert str(sel) == ("batch.kubernetes.io/controller-uid=u1,!canary,env notin (prod),"
                        "job-name=pi,tier in (a,b),track")
    assert sel.requires_exact_match("job-name") == "pi"
    assert bad(label_selector_from_dict, {"matchExpressions": [{"key": "a", "operator": "Gt"}]}) == \
        '"Gt" is not a valid label selector operator'
    assert bad(label_selector_from_dict, {"matchExpressions": [{"key": "a", "operator": "In"}]}) == \
        "values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty"
    assert bad(label_selector_from_dict,
               {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}) == \
        'values: Invalid value: ["x"]: values set must be empty for exists and does not exist'
    assert bad(label_selector_from_dict, {"matchLabels": {"a": "b c"}}).startswith(
        'values[0][a]: Invalid value: "b c": a valid label must be')


def test_label_selectors():
    sel = {"matchLabels": {"app": "x"}, "matchExpressions": [
        {"key": "tier", "operator": "In", "values": ["b", "a"]},
        {"key": "canary", "operator": "DoesNotExist"}]}
    assert v.selector_matches(sel, {"app": "x", "tier": "a"}) is True
    assert v.selector_matches(sel, {"app": "x", "tier": "c"}) is False
    assert v.selector_matches(sel, {"app": "x", "tier": "a", "canary": ""}) is False
    assert v.selector_matches({}, {"anything": "1"}) is True
    assert v.selector_matches(None, {}) is False
    assert v.selector_matches({"matchExpressions": [{"key": "k", "operator": "Bogus"}]}, {}) is None
    assert v.format_label_selector(sel) == "app=x,canary,tier in (a,b)".replace("canary", "!canary")
    assert v.format_label_selector(None) == "<none>"
    assert v.format_label_selector({}) == "<none>"
    causes = v.validate_label_selector({"matchExpressions": [
        {"key": "k", "operator": "In"}, {"key": "k", "operator": "Exists", "values": ["a"]},
        {"key": "k", "operator": "Near"}]}, "spec.selector")
    assert texts(causes) == [
        "spec.selector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
        "spec.selector.matchExpressions[1].values: Forbidden: may not be specified when `operator` is 'Exists' or "
        "'DoesNotExist'",
        'spec.selector.matchExpressions[2].operator: Invalid value: "Near": not a valid selector operator']


def test_selectors_compare_by_value():
    assert parse_label_selector("b,a=1") == parse_label_selector("a=1, b")
    assert LabelSelector.nothing() != LabelSelector.everything()
    assert parse_field_selector("metadata.name=x") == parse_field_selector("metadata.name==x")


# --------------------------------------------------------------------------- field selectors

LEASE_FIELDS = {"metadata.name", "metadata.namespace"}
JOB_FIELDS = {"metadata.name", "metadata.namespace", "status.successful"}


def getter(values: dict):
    return lambda field: values.get(field, "")


def test_field_selector_operators_and_and():
    sel = parse_field_selector("metadata.name=a,metadata.namespace!=kube-system", LEASE_FIELDS)
    assert sel.matches(getter({"metadata.name": "a", "metadata.namespace": "default"}))
    assert not sel.matches(getter({"metadata.name": "a", "metadata.namespace": "kube-system"}))
    assert not sel.matches(getter({"metadata.name": "b", "metadata.namespace": "default"}))
    assert parse_field_selector("metadata.name==a", LEASE_FIELDS).matches(getter({"metadata.name": "a"}))
    assert str(sel) == "metadata.name=a,metadata.namespace!=kube-system"
    assert sel.exact("metadata.name") == ["a"] and sel.exact("metadata.namespace") is None
    assert sel.requires_exact_match("metadata.name") == "a"


def test_field_selector_empty_terms_and_empty_value():
    assert parse_field_selector("", LEASE_FIELDS).empty
    assert parse_field_selector(",,", LEASE_FIELDS).empty
    sel = parse_field_selector("metadata.name=,", LEASE_FIELDS)
    assert sel.matches(getter({})) and not sel.matches(getter({"metadata.name": "x"}))


def test_field_selector_escapes():
    sel = parse_field_selector(r"metadata.name=a\,b\=c\\d", LEASE_FIELDS)
    assert sel.requirements[0].value == "a,b=c\\d"
    assert sel.matches(getter({"metadata.name": "a,b=c\\d"}))
    assert str(sel) == r"metadata.name=a\,b\=c\\d"              # String() escapes again
    # An escaped comma does not split terms; the terms are kept sorted.
    sel = parse_field_selector(r"metadata.namespace=x\,y,metadata.name=n", LEASE_FIELDS)
    assert [(r.field, r.value) for r in sel.requirements] == [("metadata.name", "n"),
                                                              ("metadata.namespace", "x,y")]


@pytest.mark.parametrize("text, message", [
    ("metadata.name=a=b", "invalid field selector: unescaped character in value: 61"),
    (r"metadata.name=a\x", "invalid field selector: invalid escape sequence: \\x"),
    ("metadata.name=a\\", "invalid field selector: invalid escape sequence: \\"),
    ("metadata.name", "invalid selector: 'metadata.name'; can't understand 'metadata.name'"),
    ("a=b,nonsense", "invalid selector: 'a=b,nonsense'; can't understand 'nonsense'"),
])
def test_field_selector_syntax_errors(text, message):
    assert bad(parse_field_selector, text, LEASE_FIELDS) == message


def test_field_selector_unsupported_fields():
    # Lease and Endpoints have no field-label conversion of their own: the scheme default.
    assert bad(parse_field_selector, "spec.holderIdentity=x", LEASE_FIELDS, "Lease") == \
        '"spec.holderIdentity" is not a known field selector: only "metadata.name", "metadata.namespace"'
    # Job has one (it adds status.successful), with its own wording.
    assert bad(parse_field_selector, "spec.foo=x", JOB_FIELDS, "Job") == \
        'field label "spec.foo" not supported for Job'
    assert bad(parse_field_selector, "spec.foo=x", JOB_FIELDS) == "field label not supported: spec.foo"
    # Whitespace is not trimmed from field names, as in kube.
    assert "not a known field selector" in bad(parse_field_selector, "metadata.name =x", LEASE_FIELDS)
    sel = parse_field_selector("status.successful=1", JOB_FIELDS, "Job")
    assert sel.matches(getter({"status.successful": "1"}))


def test_field_getter_over_objects():
    obj = {"metadata": {"name": "j", "namespace": "ns"}, "status": {"succeeded": 2}}
    get = field_getter(obj, {"status.successful": lambda o: str(o["status"].get("succeeded", 0))})
    assert parse_field_selector("metadata.name=j,metadata.namespace=ns,status.successful=2",
                                JOB_FIELDS).matches(get)
    assert not parse_field_selector("metadata.name=k", JOB_FIELDS).matches(get)
    assert FieldSelector().matches(get)


# --------------------------------------------------------------------------- ORM pushdown

ORM_SCRIPT = textwrap.dedent('''
    import json, os, sys
    import django
    from django.conf import settings
    url = os.environ.get("SELECTOR_DB_URL")
    if url:
        import dj_database_url
        db = dj_database_url.parse(url)
    else:
        db = {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}
    settings.configure(DATABASES={"default": db}, INSTALLED_APPS=[], USE_TZ=True)
    django.setup()
    from django.db import connection, models

    class Row(models.Model):
        name = models.CharField(max_length=50)
        namespace = models.CharField(max_length=50)
        labels = models.JSONField(null=True)

        class Meta:
            app_label = "selectorpushdown"

    with connection.schema_editor() as editor:
        editor.create_model(Row)
    try:
        from dashboard.kube.selectors import (field_selector_q, label_selector_q,
                                              parse_field_selector, parse_label_selector)
        cases = json.loads(sys.argv[1])
        for name, ns, labels in cases["rows"]:
            Row.objects.create(name=name, namespace=ns, labels=labels)
        out = {}
        for text in cases["labels"]:
            q = label_selector_q(parse_label_selector(text))
            out[text] = sorted(Row.objects.filter(q).values_list("name", flat=True))
        for text in cases["fields"]:
            sel = parse_field_selector(text)
            q = field_selector_q(sel, {"metadata.name": "name", "metadata.namespace": "namespace"})
            out["F:" + text] = sorted(Row.objects.filter(q).values_list("name", flat=True))
        print(json.dumps(out))
    finally:
        with connection.schema_editor() as editor:
            editor.delete_model(Row)
''')

ORM_ROWS = [
    ["a", "default", {"app.kubernetes.io/name": "web", "tier": "1"}],
    ["b", "default", {"app.kubernetes.io/name": "db", "x": ""}],
    ["c", "other", {}],
    ["d", "other", None],
    ["e", "default", {"tier": "10", "example.com/role": "in"}],
]
ORM_LABELS = ["app.kubernetes.io/name=web", "app.kubernetes.io/name in (web,db)", "x", "x=", "!x",
              "tier>5", "tier", "app.kubernetes.io/name notin (web)", "app.kubernetes.io/name==db,x",
              "example.com/role=in", "tier in (1)"]
ORM_FIELDS = ["metadata.name=a", "metadata.namespace!=default", "metadata.name!=a,metadata.namespace=default"]


def _run_orm(db_url: str | None) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    if db_url:
        env["SELECTOR_DB_URL"] = db_url
    payload = json.dumps({"rows": ORM_ROWS, "labels": ORM_LABELS, "fields": ORM_FIELDS})
    done = subprocess.run([sys.executable, "-c", ORM_SCRIPT, payload], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("db_url", [
    None,
    pytest.param(os.environ.get("KUBEDASH_TEST_POSTGRES_URL"), marks=[pytest.mark.postgres, pytest.mark.skipif(
        not os.environ.get("KUBEDASH_TEST_POSTGRES_URL"), reason="KUBEDASH_TEST_POSTGRES_URL not set")]),
], ids=["sqlite", "postgresql"])
def test_orm_pushdown_is_a_superset_and_exact_for_positive_terms(db_url):
    got = _run_orm(db_url)
    labels_of = {name: labels for name, _, labels in ORM_ROWS}
    exact_ops = ("=", "==", " in ")
    for text in ORM_LABELS:
        sel = parse_label_selector(text)
        want = sorted(n for n, l in labels_of.items() if sel.matches(l))
        assert set(want) <= set(got[text]), text               # never drops a match
        if all(any(op in part for op in exact_ops) and "notin" not in part and "!" not in part
               for part in text.split(",")) or text in ("x", "tier"):
            assert got[text] == want, text                      # positive terms push down exactly
    assert got["F:metadata.name=a"] == ["a"]
    assert got["F:metadata.namespace!=default"] == ["c", "d"]
    assert got["F:metadata.name!=a,metadata.namespace=default"] == ["b", "e"]


# --------------------------------------------------------------------------- durations

@pytest.mark.parametrize("seconds, text", [
    (-3, "<invalid>"), (-2, "<invalid>"), (-1.9, "0s"), (-1, "0s"), (0, "0s"), (0.9, "0s"),
    (5, "5s"), (119, "119s"), (120, "2m"), (150, "2m30s"), (599, "9m59s"), (600, "10m"),
    (10799, "179m"), (3 * 3600, "3h"), (3 * 3600 + 5 * 60, "3h5m"), (8 * 3600 - 1, "7h59m"),
    (8 * 3600, "8h"), (47 * 3600 + 59 * 60, "47h"), (48 * 3600, "2d"), (2 * 86400 + 3 * 3600, "2d3h"),
    (8 * 86400 - 1, "7d23h"), (8 * 86400, "8d"), (400 * 86400, "400d"), (729 * 86400, "729d"),
    (730 * 86400, "2y"), (731 * 86400, "2y1d"), (8 * 365 * 86400, "8y"), (20 * 365 * 86400, "20y"),
])
def test_human_duration(seconds, text):
    assert human_duration(seconds) == text


# --------------------------------------------------------------------------- test resources

def _holder(obj, now):
    return (obj.get("spec") or {}).get("holderIdentity") or "<none>"


def _endpoints(obj, now):
    addrs = [f"{a['ip']}:{p['port']}" for s in obj.get("subsets") or []
             for a in s.get("addresses") or [] for p in s.get("ports") or []]
    return ",".join(addrs) or "<none>"


def _job_status(obj, now):
    return "Complete" if (obj.get("status") or {}).get("succeeded") else "Running"


def _containers(obj, now):
    spec = obj["spec"]["template"]["spec"]
    return ",".join(c["name"] for c in spec["containers"])


LEASE = Resource(group="coordination.k8s.io", version="v1", kind="Lease", plural="leases",
                 singular="lease", model=None, definition="io.k8s.api.coordination.v1.Lease",
                 columns=(Column("Holder", "string", _holder, description="holderIdentity"),))
ENDPOINTS = Resource(group="", version="v1", kind="Endpoints", plural="endpoints", singular="endpoints",
                     model=None, definition="io.k8s.api.core.v1.Endpoints", short_names=("ep",),
                     columns=(Column("Endpoints", "string", _endpoints),))
JOB = Resource(group="batch", version="v1", kind="Job", plural="jobs", singular="job", model=None,
               definition="io.k8s.api.batch.v1.Job", categories=("all",), has_status=True,
               columns=(
                   Column("Status", "string", _job_status, description="Status of the job."),
                   Column("Containers", "string", _containers, priority=1),
                   Column("Images", "string", lambda o, n: "busybox", priority=1),
                   Column("Selector", "string", lambda o, n: "x=y", priority=1),
                   Column("Completions", "string", lambda o, n: "1/1"),
                   Column("Duration", "string", lambda o, n: "5s"),
               ))


@pytest.fixture
def kinds():
    """Register our three Resources; restore whatever the registry held afterwards."""
    saved = dict(registry._by_path), dict(registry._by_kind)
    registry._by_path.clear()
    registry._by_kind.clear()
    for r in (LEASE, ENDPOINTS, JOB):
        registry.register(r)
    yield
    registry._by_path.clear()
    registry._by_kind.clear()
    registry._by_path.update(saved[0])
    registry._by_kind.update(saved[1])


def lease(name="l1", ns="default", holder="h1", created=NOW - timedelta(minutes=10)):
    meta = {"name": name, "namespace": ns, "uid": "u-" + name, "resourceVersion": "7",
            "labels": {"app": "x"}}
    if created is not None:
        meta["creationTimestamp"] = created.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
            "spec": {"holderIdentity": holder}}


# --------------------------------------------------------------------------- tables

@pytest.mark.parametrize("accept, version", [
    (KUBECTL_TABLE_ACCEPT, "v1"),
    ("application/json;g=meta.k8s.io;v=v1;as=Table", "v1"),                 # any parameter order
    ("application/json; as=Table; g=meta.k8s.io; v=v1beta1", "v1beta1"),
    ("application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json;as=Table;v=v1;g=meta.k8s.io", "v1beta1"),
    ("application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,"
     "application/json;as=Table;v=v1;g=meta.k8s.io", "v1"),                  # skips what we can't serve
    ("application/json;as=Table;v=v2;g=meta.k8s.io,application/json", None),
    ("application/json,application/json;as=Table;v=v1;g=meta.k8s.io", None),  # plain JSON preferred
    ("application/json;q=0.5,application/json;as=Table;v=v1;g=meta.k8s.io", "v1"),
    ("application/json", None), ("*/*", None), ("", None), (None, None),
    ("application/json;as=Table;v=v1;g=example.com", None),
])
def test_table_negotiation(accept, version):
    assert table_version(accept) == version
    assert wants_table(accept) is (version is not None)


def test_column_order_puts_age_before_wide_columns(kinds):
    names = [(c["name"], c["priority"]) for c in column_definitions(JOB)]
    assert names == [("Name", 0), ("Status", 0), ("Completions", 0), ("Duration", 0), ("Age", 0),
                     ("Containers", 1), ("Images", 1), ("Selector", 1)]
    assert [c["name"] for c in column_definitions(LEASE)] == ["Name", "Holder", "Age"]
    assert [c["name"] for c in column_definitions(ENDPOINTS)] == ["Name", "Endpoints", "Age"]
    name, holder, age_col = column_definitions(LEASE)
    assert name["type"] == "string" and name["format"] == "name"
    assert name["description"].startswith("Name must be unique within a namespace")
    assert age_col["description"].startswith("CreationTimestamp is a timestamp")
    assert holder == {"name": "Holder", "type": "string", "format": "", "description": "holderIdentity",
                      "priority": 0}


def test_table_list_with_partial_metadata(kinds):
    objs = [lease("l1"), lease("l2", holder="", created=NOW - timedelta(hours=3, minutes=5))]
    table = build_table(LEASE, objs, list_meta={"resourceVersion": "1008", "continue": "tok"}, now=NOW)
    assert table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    assert table["metadata"] == {"resourceVersion": "1008", "continue": "tok"}
    assert [r["cells"] for r in table["rows"]] == [["l1", "h1", "10m"], ["l2", "<none>", "3h5m"]]
    row_obj = table["rows"][0]["object"]
    assert row_obj == {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                       "metadata": objs[0]["metadata"]}
    # kubectl needs namespace (for -A) and labels (for --show-labels) in the row object.
    assert row_obj["metadata"]["namespace"] == "default" and row_obj["metadata"]["labels"] == {"app": "x"}
    json.dumps(table)


def test_table_include_object_variants(kinds):
    obj = lease()
    full = build_table(LEASE, [obj], list_meta={"resourceVersion": "9"}, include_object="Object", now=NOW)
    assert full["rows"][0]["object"] == obj                      # kubectl --sort-by needs this
    bare = {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}
    filled = build_table(LEASE, [bare], list_meta={}, include_object="Object", now=NOW)
    assert filled["rows"][0]["object"]["kind"] == "Lease"
    assert filled["rows"][0]["object"]["apiVersion"] == "coordination.k8s.io/v1"
    none = build_table(LEASE, [obj], list_meta={}, include_object="None", now=NOW)
    assert "object" not in none["rows"][0] and none["rows"][0]["cells"] == ["l1", "h1", "10m"]
    for default in ("", None, "Metadata"):
        meta = build_table(LEASE, [obj], list_meta={}, include_object=default, now=NOW)
        assert meta["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    assert bad(build_table, LEASE, [obj], list_meta={}, include_object="Everything", now=NOW) == (
        "Unable to convert to Table as requested: includeObject: Invalid value: \"Everything\": "
        "must be 'Metadata', 'Object', 'None', or empty")


def test_single_object_table_and_watch_rows(kinds):
    one = build_table(LEASE, [lease()], now=NOW)
    assert one["metadata"] == {"resourceVersion": "7"} and len(one["rows"]) == 1
    later = build_table(LEASE, [lease()], now=NOW, with_columns=False)
    assert later["columnDefinitions"] == [] and later["rows"] == one["rows"]
    beta = build_table(LEASE, [lease()], now=NOW, version="v1beta1")
    assert beta["apiVersion"] == "meta.k8s.io/v1beta1"
    assert beta["rows"][0]["object"]["apiVersion"] == "meta.k8s.io/v1beta1"
    empty = build_table(LEASE, [], list_meta={"resourceVersion": "3"}, now=NOW)
    assert empty["rows"] == [] and empty["metadata"] == {"resourceVersion": "3"}


def test_table_age_edge_cases_and_wide_cells(kinds):
    no_time = build_table(LEASE, [lease(created=None)], now=NOW)
    assert no_time["rows"][0]["cells"][2] == "<unknown>"
    future = build_table(LEASE, [lease(created=NOW + timedelta(seconds=30))], now=NOW)
    assert future["rows"][0]["cells"][2] == "<invalid>"
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "pi", "namespace": "default", "creationTimestamp": "2025-01-01T11:00:00Z"},
           "spec": {"template": {"spec": {"containers": [{"name": "c1"}, {"name": "c2"}]}}},
           "status": {"succeeded": 1}}
    cells = build_table(JOB, [job], now=NOW)["rows"][0]["cells"]
    assert cells == ["pi", "Complete", "1/1", "5s", "60m", "c1,c2", "busybox", "x=y"]
    ep = {"metadata": {"name": "svc", "namespace": "default", "creationTimestamp": "2025-01-01T11:59:00Z"},
          "subsets": [{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 80}]}]}
    assert build_table(ENDPOINTS, [ep], now=NOW)["rows"][0]["cells"] == ["svc", "10.0.0.1:80", "60s"]


# --------------------------------------------------------------------------- discovery

@pytest.mark.parametrize("accept, flavour", [
    (KUBECTL_DISCOVERY_ACCEPT, "v2"),
    ("application/json;as=APIGroupDiscoveryList;v=v2;g=apidiscovery.k8s.io", "v2"),
    ("application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json", "v2beta1"),
    ("application/json", "legacy"), ("application/json, */*", "legacy"), ("*/*", "legacy"),
    ("", "legacy"), (None, "legacy"),
    ("application/vnd.kubernetes.protobuf", "legacy"),                         # never 406
    ("application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList", "legacy"),
    ("application/json,application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", "legacy"),
    ("application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
     "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", "v2"),
])
def test_discovery_negotiation(accept, flavour):
    assert discovery.negotiate(accept) == flavour


def test_discovery_content_types():
    assert discovery.content_type("v2") == \
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    assert discovery.content_type("v2beta1") == discovery.AGGREGATED_CONTENT_TYPE_V2BETA1
    assert discovery.content_type("legacy") == "application/json"


VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


def _kubectl_requirements(doc: dict):
    """What KUBECTL.md section 1 found kubectl needs from an aggregated document."""
    resources = {}
    for item in doc["items"]:
        assert "metadata" in item
        for version in item["versions"]:
            assert version["version"]
            for r in version["resources"]:
                kind = r["responseKind"]
                assert set(kind) == {"group", "version", "kind"}
                assert r["scope"] == "Namespaced"
                assert r["verbs"] == VERBS
                resources[r["resource"]] = (item["metadata"].get("name", ""), version["version"], r)
    return resources


def test_aggregated_core_discovery(kinds):
    doc = discovery.aggregated(core=True, flavour="v2")
    assert doc["kind"] == "APIGroupDiscoveryList"
    assert doc["apiVersion"] == "apidiscovery.k8s.io/v2" and doc["metadata"] == {}
    assert len(doc["items"]) == 1 and doc["items"][0]["metadata"] == {}
    version = doc["items"][0]["versions"][0]
    assert version["version"] == "v1" and version["freshness"] == "Current"
    resources = _kubectl_requirements(doc)
    assert set(resources) == {"endpoints"}
    _, _, ep = resources["endpoints"]
    assert ep == {"resource": "endpoints", "responseKind": {"group": "", "version": "v1", "kind": "Endpoints"},
                  "scope": "Namespaced", "singularResource": "endpoints", "verbs": VERBS,
                  "shortNames": ["ep"]}
    json.dumps(doc)


def test_aggregated_group_discovery(kinds):
    full = discovery.aggregated(core=False, flavour="v2")
    assert [i["metadata"]["name"] for i in full["items"]] == ["coordination.k8s.io", "batch", "authentication.k8s.io",
                                                              "authorization.k8s.io"]   # (+ the access reviews)
    doc = {**full, "items": full["items"][:2]}   # the kinds (the reviews are cluster-scoped, create only)
    resources = _kubectl_requirements(doc)
    assert set(resources) == {"leases", "jobs"}
    group, version, jobs = resources["jobs"]
    assert (group, version) == ("batch", "v1")
    assert jobs["responseKind"] == {"group": "batch", "version": "v1", "kind": "Job"}
    assert jobs["categories"] == ["all"] and jobs["singularResource"] == "job"     # kubectl get all
    assert jobs["subresources"] == [{"subresource": "status",
                                     "responseKind": {"group": "batch", "version": "v1", "kind": "Job"},
                                     "verbs": ["get", "patch", "update"]}]
    _, _, leases = resources["leases"]
    assert "shortNames" not in leases and "subresources" not in leases
    beta = discovery.aggregated(core=False, flavour="v2beta1")
    assert beta["apiVersion"] == "apidiscovery.k8s.io/v2beta1" and beta["items"] == full["items"]
    with pytest.raises(ValueError):
        discovery.aggregated(core=False, flavour="legacy")


def test_root_document_pairs_body_and_content_type(kinds):
    body, ctype = discovery.root_document(True, KUBECTL_DISCOVERY_ACCEPT, "127.0.0.1:6443")
    assert ctype == discovery.AGGREGATED_CONTENT_TYPE and body["kind"] == "APIGroupDiscoveryList"
    body, ctype = discovery.root_document(False, "application/json, */*", "127.0.0.1:6443")
    assert ctype == "application/json" and body["kind"] == "APIGroupList"


def test_legacy_discovery(kinds):
    assert discovery.legacy_api_versions("10.0.0.1:6443") == {
        "kind": "APIVersions", "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "10.0.0.1:6443"}]}
    groups = discovery.legacy_group_list()
    assert groups["kind"] == "APIGroupList" and groups["apiVersion"] == "v1"
    assert groups["groups"][1] == {"name": "batch", "versions": [{"groupVersion": "batch/v1", "version": "v1"}],
                                   "preferredVersion": {"groupVersion": "batch/v1", "version": "v1"}}
    assert discovery.api_group("batch")["kind"] == "APIGroup"
    assert discovery.api_group("batch")["preferredVersion"]["groupVersion"] == "batch/v1"
    assert discovery.api_group("nope") is None and discovery.api_group("") is None


def test_api_resource_lists(kinds):
    core = discovery.api_resource_list("", "v1")
    assert core["kind"] == "APIResourceList" and core["groupVersion"] == "v1"
    assert core["resources"] == [{"name": "endpoints", "singularName": "endpoints", "namespaced": True,
                                  "kind": "Endpoints", "verbs": VERBS, "shortNames": ["ep"],
                                  "storageVersionHash": "fWeeMqaN/OA="}]   # kube-apiserver's value
    batch = discovery.api_resource_list("batch", "v1")
    assert batch["apiVersion"] == "v1" and batch["groupVersion"] == "batch/v1"
    jobs, status = batch["resources"]
    assert jobs["name"] == "jobs" and jobs["categories"] == ["all"] and jobs["namespaced"] is True
    assert status == {"name": "jobs/status", "singularName": "", "namespaced": True, "kind": "Job",
                      "verbs": ["get", "patch", "update"]}
    leases = discovery.api_resource_list("coordination.k8s.io", "v1")
    assert [r["name"] for r in leases["resources"]] == ["leases"]
    assert discovery.api_resource_list("batch", "v2") is None
    assert discovery.api_resource_list("nope", "v1") is None


def test_version_info():
    info = discovery.version_info()
    assert info["major"] == "1" and info["minor"] == "32"
    # The Kubernetes version served, then kubedash's release (pyproject.toml) as a pre-release part.
    import tomllib
    release = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"]["version"]
    assert info["gitVersion"] == f"v1.32.0-kubedash.{release}"
    assert set(info) == {"major", "minor", "gitVersion", "gitCommit", "gitTreeState", "buildDate",
                         "goVersion", "compiler", "platform"}
    assert all(isinstance(v, str) and v for v in info.values())


# ------------------------------------------------- Tables of stored texts (cached rows)

def _real_objects():
    """The three real kinds, as stored: jobs running, finished and not started."""
    from manifests import endpoints, job
    from dashboard.batch.resource import JOBS
    from dashboard.coordination.resource import LEASES
    from dashboard.core.resource import ENDPOINTS as EPS

    def stored(obj, rv, created):
        obj = json.loads(json.dumps(obj))
        obj["metadata"].update(resourceVersion=str(rv), uid=f"uid-{rv}", creationTimestamp=created,
                               managedFields=[{"manager": "m", "operation": "Update", "time": created,
                                               "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}])
        return obj

    t = "2026-01-02T03:04:05Z"
    running = stored(job("run"), 1, t)
    running["spec"]["selector"] = {"matchLabels": {"b": "2", "a": "1"},
                                   "matchExpressions": [{"key": "k", "operator": "In", "values": ["y", "x"]}]}
    running["status"] = {"startTime": "2026-01-02T03:05:00Z", "active": 1}
    done = stored(job("done"), 2, t)
    done["status"] = {"startTime": "2026-01-02T03:05:00Z", "completionTime": "2026-01-02T03:07:30Z",
                      "succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}
    waiting = stored(job("waiting"), 3, t)
    no_time = stored(job("no-time"), 4, t)
    del no_time["metadata"]["creationTimestamp"]
    return [(JOBS, [running, done, waiting, no_time]),
            (LEASES, [stored(lease("l1"), 5, t), stored(lease("l2", holder=""), 6, t)]),
            (EPS, [stored(endpoints("svc", ips=("10.0.0.1", "10.0.0.2"), not_ready=("10.0.0.3",)), 7, t)])]


@pytest.mark.parametrize("include", ["Metadata", "None", "Object", ""])
@pytest.mark.parametrize("version", ["v1", "v1beta1"])
def test_tables_from_stored_texts_equal_tables_from_objects(include, version):
    import orjson

    from dashboard.kube.tables import table_of_texts
    for when in (datetime(2026, 1, 2, 3, 10, tzinfo=timezone.utc), datetime(2026, 3, 1, tzinfo=timezone.utc)):
        for res, objects in _real_objects():
            texts = [orjson.dumps(o) for o in objects]
            meta = {"resourceVersion": "99"}
            expected = build_table(res, objects, list_meta=meta, include_object=include, now=when, version=version)
            for _ in range(2):       # the second time from cached rows
                got = orjson.loads(orjson.dumps(table_of_texts(res, texts, list_meta=meta, include_object=include,
                                                               now=when, version=version)))
                assert got == orjson.loads(orjson.dumps(expected))


def test_cached_rows_keep_time_cells_live_and_follow_new_revisions():
    import orjson

    from dashboard.batch.resource import JOBS
    from dashboard.kube.tables import table_of_texts
    running = _real_objects()[0][1][0]
    text = orjson.dumps(running)
    at = lambda when: table_of_texts(JOBS, [text], list_meta={}, now=when)["rows"][0]["cells"]  # noqa: E731
    early, later = at(datetime(2026, 1, 2, 3, 6, tzinfo=timezone.utc)), at(datetime(2026, 1, 2, 5, 6, tzinfo=timezone.utc))
    # Name, Status, Completions, Duration, Age, ...: the duration and the age move with the clock.
    assert early[3] == "60s" and later[3] == "121m" and early[4] == "115s" and later[4] == "121m"
    assert early[:3] == later[:3] and early[5:] == later[5:]
    assert later[-1] == "a=1,b=2,k in (x,y)"
    running["status"]["succeeded"] = 1
    running["metadata"]["resourceVersion"] = "11"
    assert table_of_texts(JOBS, [orjson.dumps(running)], list_meta={}, now=datetime(2026, 1, 2, 5, 6, tzinfo=timezone.utc)
                          )["rows"][0]["cells"][2] == "1/1"
