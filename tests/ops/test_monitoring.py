"""deploy/'s monitoring files: the Prometheus rules (promtool), the PrometheusRule and ServiceMonitor
for the Prometheus Operator, the Grafana dashboard. No server: what they say is checked against
the code (every metric they name is one kubedash exports) and against the other manifests.

The ServiceMonitor is a custom resource, which kubernetes-validate cannot know: it is checked
against a schema written here for the fields kubedash uses (the names and types of
monitoring.coreos.com/v1's CRD, prometheus-operator 0.84), with unknown fields refused as
`kubectl apply --validate=strict` refuses them, plus what the schema cannot say (its selector,
port and Secret exist in deploy/kubernetes).
"""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import jsonschema
import pytest
import yaml

from conftest import ROOT, require_tool
PROMETHEUS = ROOT / "deploy" / "prometheus"
RULES = PROMETHEUS / "kubedash-rules.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "kubedash-dashboard.json"
K8S = ROOT / "deploy" / "kubernetes"


def require_promtool() -> str:
    return require_tool("promtool", "Debian's prometheus package")


def promtool(*args: str, cwd: Path = PROMETHEUS) -> str:
    out = subprocess.run([require_promtool(), *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


# --- metric names: what the code declares ------------------------------------------------------

DECLARED = re.compile(r'\b(Counter|Gauge|Histogram|GaugeMetricFamily|CounterMetricFamily)\(\s*"([a-z_:]+)"')
PROCESS = {"process_cpu_seconds_total", "process_resident_memory_bytes", "process_virtual_memory_bytes",
           "process_open_fds", "process_max_fds", "process_start_time_seconds"}
PROMQL_NAME = re.compile(r"\b((?:apiserver|kubedash|process)_[a-z_]+)\b")


def exported_names() -> set[str]:
    """Every sample name kubedash's code can export (Prometheus' own `up` aside)."""
    names = set(PROCESS)
    for path in (ROOT / "dashboard").rglob("*.py"):
        for kind, name in DECLARED.findall(path.read_text()):
            if kind == "Counter":
                names.add(name if name.endswith("_total") else name + "_total")
            elif kind == "Histogram":
                names |= {name + "_bucket", name + "_sum", name + "_count"}
            else:
                names.add(name)
    return names


def test_the_code_declares_the_metrics_this_module_looks_for():
    names = exported_names()
    assert {"apiserver_request_total", "apiserver_request_duration_seconds_bucket", "kubedash_maintenance_leader",
            "kubedash_revision_compaction_overdue_seconds", "kubedash_ready", "kubedash_redis_up",
            "kubedash_certificate_expiry_timestamp_seconds", "kubedash_database_up",
            "kubedash_follow_skipped_total", "kubedash_notify_outbox_oldest_seconds",
            "kubedash_notify_deliveries_total", "kubedash_notify_retries_total", "kubedash_notify_failures_total"} <= names


def rule_exprs() -> list[str]:
    return [rule["expr"] for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


def test_rules_name_only_exported_metrics():
    names = exported_names()
    for expr in rule_exprs():
        unknown = set(PROMQL_NAME.findall(expr)) - names
        assert not unknown, f"{expr!r} names metrics kubedash does not export: {sorted(unknown)}"


# --- the rules ----------------------------------------------------------------------------------

def test_rules_load_and_their_unit_tests_pass():
    """promtool check rules, and promtool test rules kubedash-rules.test.yml: the compaction alert
    stays quiet on a healthy system writing 1,000 revisions/s (where the old log-length rule fired)
    and fires on a stalled one; NotReady follows kubedash_ready with `up` at 1; skipped followed
    objects, Redis, connections and certificates."""
    promtool("check", "rules", RULES.name)
    out = promtool("test", "rules", "kubedash-rules.test.yml")
    assert "SUCCESS" in out


def test_prometheusrule_holds_the_same_groups():
    doc = yaml.safe_load((PROMETHEUS / "prometheusrule.yaml").read_text())
    assert (doc["apiVersion"], doc["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    assert doc["metadata"]["namespace"] == "kubedash"
    assert doc["spec"] == yaml.safe_load(RULES.read_text()), "prometheusrule.yaml and kubedash-rules.yml differ"


def test_every_alert_the_docs_list_ships():
    """The skipped-objects alert was listed in OPERATIONS and missing from the rules."""
    alerts = {rule["alert"] for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]}
    assert {"KubedashFollowedObjectsSkipped", "KubedashNotReady", "KubedashCompactionStalled"} <= alerts
    assert "KubedashLogGrowth" not in alerts
    docs = (ROOT / "docs" / "OPERATIONS.md").read_text()
    for alert in alerts:
        assert f"`{alert}`" in docs, f"docs/OPERATIONS.md does not describe {alert}"


# --- the ServiceMonitor ------------------------------------------------------------------------

def _object(properties: dict, required: list[str] | None = None) -> dict:
    return {"type": "object", "properties": properties, "required": required or [], "additionalProperties": False}


_STRING = {"type": "string"}
_SECRET_KEY = _object({"name": _STRING, "key": _STRING, "optional": {"type": "boolean"}}, ["key"])
_DURATION = {"type": "string",
             "pattern": r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"}
_SELECTOR = _object({"matchLabels": {"type": "object", "additionalProperties": _STRING},
                     "matchExpressions": {"type": "array"}})
SERVICE_MONITOR = _object({
    "apiVersion": {"const": "monitoring.coreos.com/v1"},
    "kind": {"const": "ServiceMonitor"},
    "metadata": {"type": "object", "required": ["name", "namespace"]},
    "spec": _object({
        "jobLabel": _STRING,
        "selector": _SELECTOR,
        "namespaceSelector": _object({"any": {"type": "boolean"}, "matchNames": {"type": "array", "items": _STRING}}),
        "endpoints": {"type": "array", "minItems": 1, "items": _object({
            "port": _STRING, "targetPort": {"type": ["string", "integer"]}, "path": _STRING,
            "scheme": {"enum": ["http", "https", "HTTP", "HTTPS"]},
            "interval": _DURATION, "scrapeTimeout": _DURATION, "honorLabels": {"type": "boolean"},
            "authorization": _object({"type": _STRING, "credentials": _SECRET_KEY}),
            "bearerTokenSecret": _SECRET_KEY,
            "tlsConfig": {"type": "object"}, "relabelings": {"type": "array"}, "metricRelabelings": {"type": "array"},
        })},
    }, ["selector", "endpoints"]),
}, ["apiVersion", "kind", "metadata", "spec"])


def _manifest(name: str) -> dict:
    return yaml.safe_load((K8S / name).read_text())


def test_servicemonitor_is_valid_and_scrapes_the_service_with_the_metrics_token():
    monitor = yaml.safe_load((PROMETHEUS / "servicemonitor.yaml").read_text())
    jsonschema.validate(monitor, SERVICE_MONITOR)
    service, secret = _manifest("service.yaml"), _manifest("secret.yaml")
    assert monitor["metadata"]["namespace"] == service["metadata"]["namespace"] == secret["metadata"]["namespace"]
    spec = monitor["spec"]
    assert spec["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert service["metadata"]["namespace"] in spec["namespaceSelector"]["matchNames"]
    assert spec["jobLabel"] in service["metadata"]["labels"]
    [endpoint] = spec["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert endpoint["path"] == "/metrics"
    credentials = endpoint["authorization"]["credentials"]
    assert credentials["name"] == secret["metadata"]["name"] and credentials["key"] in secret["stringData"]
    # the rules' KubedashDown matches the job this ServiceMonitor gives its targets
    job = service["metadata"]["labels"][spec["jobLabel"]]
    assert re.fullmatch(".*kubedash.*", job)


def test_the_schema_refuses_what_the_crd_would_not_take():
    monitor = yaml.safe_load((PROMETHEUS / "servicemonitor.yaml").read_text())
    monitor["spec"]["endpoints"][0]["intervall"] = "30s"
    with pytest.raises(jsonschema.ValidationError, match="intervall"):
        jsonschema.validate(monitor, SERVICE_MONITOR)
    monitor["spec"]["endpoints"][0].pop("intervall")
    monitor["spec"]["endpoints"][0]["interval"] = "30 seconds"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(monitor, SERVICE_MONITOR)


# --- the Grafana dashboard ---------------------------------------------------------------------

_DATASOURCE = {"const": {"type": "prometheus", "uid": "${datasource}"}}
DASHBOARD_SCHEMA = {
    "type": "object",
    "required": ["title", "uid", "schemaVersion", "panels", "templating", "time"],
    "properties": {
        "title": {"type": "string", "minLength": 1},
        "uid": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,40}$"},
        "schemaVersion": {"type": "integer", "minimum": 30},
        "templating": {"type": "object", "required": ["list"], "properties": {"list": {"type": "array"}}},
        "panels": {"type": "array", "minItems": 1, "items": {
            "type": "object",
            "required": ["id", "type", "title", "gridPos", "targets", "datasource"],
            "properties": {
                "id": {"type": "integer", "minimum": 1},
                "type": {"enum": ["timeseries", "stat", "gauge", "table", "text"]},
                "title": {"type": "string", "minLength": 1},
                "datasource": _DATASOURCE,
                "gridPos": {"type": "object", "required": ["x", "y", "w", "h"],
                            "properties": {"x": {"type": "integer", "minimum": 0, "maximum": 23},
                                           "y": {"type": "integer", "minimum": 0},
                                           "w": {"type": "integer", "minimum": 1, "maximum": 24},
                                           "h": {"type": "integer", "minimum": 1}}},
                "targets": {"type": "array", "minItems": 1, "items": {
                    "type": "object", "required": ["refId", "expr", "datasource"],
                    "properties": {"refId": {"type": "string", "pattern": "^[A-Z]$"},
                                   "expr": {"type": "string", "minLength": 1}, "datasource": _DATASOURCE}}},
            }}},
    },
}


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def dashboard_exprs() -> list[str]:
    return [t["expr"] for p in dashboard()["panels"] for t in p["targets"]]


def test_dashboard_structure():
    board = dashboard()
    jsonschema.validate(board, DASHBOARD_SCHEMA)
    panels = board["panels"]
    assert len({p["id"] for p in panels}) == len(panels), "panel ids must be unique"
    for p in panels:
        grid = p["gridPos"]
        assert grid["x"] + grid["w"] <= 24, f"{p['title']} overflows the 24-column grid"
        refs = [t["refId"] for t in p["targets"]]
        assert len(set(refs)) == len(refs), f"{p['title']}: refIds repeat"
    cells = [(p["gridPos"]["x"] + dx, p["gridPos"]["y"] + dy) for p in panels
             for dx in range(p["gridPos"]["w"]) for dy in range(p["gridPos"]["h"])]
    assert len(cells) == len(set(cells)), "panels overlap"
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    used = set(re.findall(r"\$(\w+)", json.dumps([p["targets"] for p in panels])))
    assert used - {"__rate_interval", "datasource"} <= set(variables), "a query uses an undefined variable"


def test_dashboard_queries_parse_and_name_exported_metrics(tmp_path):
    """Each panel query is valid PromQL (promtool parses it as a recording rule, with Grafana's
    variables filled in) and names only metrics kubedash exports."""
    names = exported_names()
    exprs = dashboard_exprs()
    for expr in exprs:
        unknown = set(PROMQL_NAME.findall(expr)) - names
        assert not unknown, f"{expr!r} names metrics kubedash does not export: {sorted(unknown)}"
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query{i}", "expr": e.replace("$__rate_interval", "5m").replace("$job", ".*")}
        for i, e in enumerate(exprs)]}]}
    (tmp_path / "dashboard.yml").write_text(yaml.safe_dump(rules))
    promtool("check", "rules", "dashboard.yml", cwd=tmp_path)
