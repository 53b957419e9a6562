"""schema.decode, the three patch mechanisms, and the OpenAPI documents.

Pure Python: no database, no Django settings needed.
"""
from __future__ import annotations

import json
import time

import pytest

from dashboard.kube import codec, openapi, patch, registry, schema
from dashboard.kube.errors import ApiError
from dashboard.kube.registry import Resource

LEASE = "io.k8s.api.coordination.v1.Lease"
JOB = "io.k8s.api.batch.v1.Job"
ENDPOINTS = "io.k8s.api.core.v1.Endpoints"


def lease() -> dict:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": "l1", "namespace": "default", "uid": "0b7c", "resourceVersion": "12",
            "creationTimestamp": "2025-01-01T00:00:00Z", "labels": {"app": "x"},
            "annotations": {"note": "y"},
            "managedFields": [{"manager": "m", "operation": "Update", "apiVersion": "coordination.k8s.io/v1",
                               "time": "2025-01-01T00:00:00Z", "fieldsType": "FieldsV1",
                               "fieldsV1": {"f:spec": {"f:holderIdentity": {}}}}],
        },
        "spec": {"holderIdentity": "h1", "leaseDurationSeconds": 15,
                 "acquireTime": "2025-01-01T00:00:00.000000Z",
                 "renewTime": "2025-01-01T00:00:05.000000Z", "leaseTransitions": 2},
    }


def job() -> dict:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "default", "labels": {"a": "1", "b": "2"},
                     "finalizers": ["f1", "f2"]},
        "spec": {
            "backoffLimit": 6,
            "template": {"spec": {
                "containers": [{
                    "name": "c", "image": "busybox", "command": ["old"],
                    "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                    "resources": {"limits": {"cpu": "100m", "memory": "64Mi"}},
                }],
                "volumes": [{"name": "v", "emptyDir": {}}],
                "restartPolicy": "Never",
            }},
        },
        "status": {"conditions": [
            {"type": "Suspended", "status": "False", "reason": "R1"},
            {"type": "Complete", "status": "False"},
        ]},
    }


def containers(obj: dict) -> list:
    return obj["spec"]["template"]["spec"]["containers"]


def raises(code: int, fn, *args) -> ApiError:
    with pytest.raises(ApiError) as info:
        fn(*args)
    assert info.value.code == code, info.value.status()
    return info.value


# =========================================================================== schema

def test_definitions_load_and_resolve():
    defs = schema.definitions()
    assert LEASE in defs and JOB in defs
    assert schema.definitions() is defs                      # loaded once
    spec = defs[LEASE]["properties"]["spec"]
    assert schema.resolve(spec) is defs["io.k8s.api.coordination.v1.LeaseSpec"]
    assert schema.resolve({"allOf": [{"$ref": "#/$defs/" + LEASE}]}) is defs[LEASE]
    assert schema.resolve({"type": "string"}) == {"type": "string"}


def test_decode_valid_lease_is_unchanged():
    obj = lease()
    out, unknown = schema.decode(obj, LEASE)
    assert out == obj and unknown == []
    assert out is not obj and out["spec"] is not obj["spec"]   # a copy


def test_unknown_fields_are_dropped_and_reported_with_kube_paths():
    obj = job()
    obj["spec"]["bogusField"] = 1
    obj["metadata"]["nope"] = "x"
    obj["spec"]["template"]["spec"]["containers"].append({"name": "d", "image": "i"})
    obj["spec"]["template"]["spec"]["containers"][1]["imagee"] = "typo"
    obj["spec"]["template"]["spec"]["containers"][0]["env"][1]["valuee"] = "x"
    obj["status"]["conditions"][0]["extra"] = True
    out, unknown = schema.decode(obj, JOB)
    assert unknown == [
        "metadata.nope",
        "spec.template.spec.containers[0].env[1].valuee",
        "spec.template.spec.containers[1].imagee",
        "spec.bogusField",
        "status.conditions[0].extra",
    ]
    assert "bogusField" not in out["spec"]
    assert containers(out)[1] == {"name": "d", "image": "i"}
    assert out["status"]["conditions"][0] == {"type": "Suspended", "status": "False", "reason": "R1"}


def test_lease_has_no_status_and_top_level_meta_fields_are_known():
    obj = lease()
    obj["status"] = {}
    out, unknown = schema.decode(obj, LEASE)
    assert unknown == ["status"] and "status" not in out
    assert {"apiVersion", "kind", "metadata"} <= set(out)


def test_map_fields_take_any_keys():
    obj = job()
    obj["metadata"]["labels"]["weird/key.io"] = "v"
    obj["metadata"]["annotations"] = {"anything": "goes"}
    containers(obj)[0]["resources"]["requests"] = {"nvidia.com/gpu": 1, "cpu": 0.5}
    out, unknown = schema.decode(obj, JOB)
    assert unknown == []
    assert containers(out)[0]["resources"]["requests"] == {"nvidia.com/gpu": 1, "cpu": 0.5}


def test_free_form_fields_are_kept_verbatim():
    obj = lease()
    obj["metadata"]["managedFields"][0]["fieldsV1"] = {"f:spec": {"f:anything": {".": {}}}}
    out, unknown = schema.decode(obj, LEASE)
    assert unknown == [] and out["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"]["f:anything"]


@pytest.mark.parametrize("mutate, message", [
    (lambda o: o["spec"].__setitem__("leaseDurationSeconds", "15"),
     'Lease in version "v1" cannot be handled as a Lease: json: cannot unmarshal string into '
     'Go struct field LeaseSpec.spec.leaseDurationSeconds of type int32'),
    (lambda o: o["spec"].__setitem__("leaseDurationSeconds", 1.5),
     "json: cannot unmarshal number 1.5 into Go struct field LeaseSpec.spec.leaseDurationSeconds of type int32"),
    (lambda o: o["spec"].__setitem__("leaseTransitions", 2 ** 31),
     "json: cannot unmarshal number 2147483648 into Go struct field LeaseSpec.spec.leaseTransitions of type int32"),
    (lambda o: o["spec"].__setitem__("leaseDurationSeconds", True),
     "json: cannot unmarshal bool into Go struct field LeaseSpec.spec.leaseDurationSeconds of type int32"),
    (lambda o: o["spec"].__setitem__("holderIdentity", 7),
     "json: cannot unmarshal number into Go struct field LeaseSpec.spec.holderIdentity of type string"),
    (lambda o: o.__setitem__("spec", []),
     "json: cannot unmarshal array into Go struct field Lease.spec of type v1.LeaseSpec"),
    (lambda o: o["metadata"].__setitem__("labels", {"a": 1}),
     "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels.a of type string"),
    (lambda o: o["spec"].__setitem__("renewTime", 12),
     "json: cannot unmarshal number into Go struct field LeaseSpec.spec.renewTime of type v1.MicroTime"),
])
def test_wrong_json_types_are_400_with_field_path_and_go_type(mutate, message):
    obj = lease()
    mutate(obj)
    err = raises(400, schema.decode, obj, LEASE)
    assert err.reason == "BadRequest"
    assert err.message.endswith(message)
    assert err.detail.startswith("json: cannot unmarshal")


def test_wrong_types_deep_inside_lists():
    obj = job()
    containers(obj)[0]["ports"] = [{"containerPort": "80"}]
    err = raises(400, schema.decode, obj, JOB)
    assert err.detail == ("json: cannot unmarshal string into Go struct field ContainerPort."
                          "spec.template.spec.containers.ports.containerPort of type int32")
    obj = job()
    obj["spec"]["template"]["spec"]["containers"] = {"name": "c"}
    err = raises(400, schema.decode, obj, JOB)
    assert err.detail == ("json: cannot unmarshal object into Go struct field PodSpec."
                          "spec.template.spec.containers of type []v1.Container")
    obj = job()
    containers(obj)[0]["command"] = ["sh", 1]
    err = raises(400, schema.decode, obj, JOB)
    assert "Container.spec.template.spec.containers.command of type string" in err.detail


def test_top_level_must_be_an_object():
    err = raises(400, schema.decode, [], LEASE)
    assert err.detail == "json: cannot unmarshal array into Go value of type v1.Lease"


def test_nulls_mean_unset():
    obj = lease()
    obj["spec"]["holderIdentity"] = None
    obj["metadata"]["labels"] = None
    out, unknown = schema.decode(obj, LEASE)
    assert "holderIdentity" not in out["spec"] and "labels" not in out["metadata"]
    assert unknown == []
    # Go's decoder turns a null list element / map value into the zero value.
    obj = job()
    containers(obj)[0]["command"] = ["a", None]
    obj["metadata"]["labels"]["c"] = None
    out, _ = schema.decode(obj, JOB)
    assert containers(out)[0]["command"] == ["a", ""]
    assert out["metadata"]["labels"]["c"] == ""


def test_int_or_string_and_quantity_accept_both_forms():
    for port in (8080, "http"):
        obj = job()
        containers(obj)[0]["livenessProbe"] = {"httpGet": {"port": port, "path": "/"}}
        out, unknown = schema.decode(obj, JOB)
        assert containers(out)[0]["livenessProbe"]["httpGet"]["port"] == port and unknown == []
    obj = job()
    containers(obj)[0]["livenessProbe"] = {"httpGet": {"port": 1.5}}
    raises(400, schema.decode, obj, JOB)
    for quantity in ("100m", "1.5Gi", "2", 2, 0.5, "1e3", "500Ki"):
        obj = job()
        containers(obj)[0]["resources"]["limits"]["cpu"] = quantity
        out, _ = schema.decode(obj, JOB)
        assert containers(out)[0]["resources"]["limits"]["cpu"] == quantity
    obj = job()
    containers(obj)[0]["resources"]["limits"]["cpu"] = "lots"
    err = raises(400, schema.decode, obj, JOB)
    assert "quantities must match the regular expression" in err.message


def test_times_are_strings_not_parsed_here():
    obj = lease()
    obj["spec"]["renewTime"] = "not-a-time-but-a-string"
    out, _ = schema.decode(obj, LEASE)
    assert out["spec"]["renewTime"] == "not-a-time-but-a-string"


def test_strict_error_and_warnings():
    err = schema.strict_error(LEASE, ["spec.bogusField", "spec.x"])
    assert err.code == 400 and err.reason == "BadRequest"
    assert err.message == ('Lease in version "v1" cannot be handled as a Lease: strict decoding error: '
                           'unknown field "spec.bogusField", unknown field "spec.x"')
    assert schema.unknown_field_warnings(["spec.bogusField"]) == ['unknown field "spec.bogusField"']


def test_merge_info_exposes_patch_metadata():
    pod_spec = schema.merge_info("io.k8s.api.core.v1.PodSpec")
    node, meta = pod_spec.field("containers")
    assert isinstance(node, schema.ListNode)
    assert meta.merge_key == "name" and "merge" in meta.strategies and meta.list_type == "map"
    _, volumes = pod_spec.field("volumes")
    assert volumes.strategies == {"merge", "retainKeys"}
    _, subsets = schema.merge_info(ENDPOINTS).field("subsets")
    assert subsets.merge_key is None and not subsets.strategies and subsets.list_type == "atomic"
    _, conditions = schema.merge_info("io.k8s.api.batch.v1.JobStatus").field("conditions")
    assert conditions.merge_key == "type" and "merge" in conditions.strategies
    _, finalizers = schema.merge_info("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta").field("finalizers")
    assert finalizers.strategies == {"merge"} and finalizers.merge_key is None


def test_decode_of_a_lease_is_fast():
    # The Lease renew path decodes on every request. Generous bound: catches a regression
    # to an uncompiled walk (~20x slower), not machine noise.
    obj = lease()
    schema.decode(obj, LEASE)
    n = 2000
    start = time.perf_counter()
    for _ in range(n):
        schema.decode(obj, LEASE)
    assert (time.perf_counter() - start) / n < 500e-6


# =========================================================================== strategic merge

KUBECTL_APPLY_BODY = {
    "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
    "spec": {"backoffLimit": 3, "template": {"spec": {
        "$setElementOrder/containers": [{"name": "c"}],
        "containers": [{"command": ["x"], "name": "c"}],
    }}},
}


def test_smp_kubectl_apply_keeps_container_image():
    original = job()
    out = patch.strategic_merge_patch(original, KUBECTL_APPLY_BODY, JOB)
    c = containers(out)
    assert len(c) == 1
    assert c[0]["image"] == "busybox" and c[0]["command"] == ["x"]
    assert c[0]["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    assert out["spec"]["backoffLimit"] == 3
    assert out["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] == "{}"
    assert "$setElementOrder/containers" not in out["spec"]["template"]["spec"]
    assert original == job()                                    # input untouched


def test_smp_accepts_bytes_and_env_merges_by_name():
    body = json.dumps({"spec": {"template": {"spec": {"containers": [
        {"name": "c", "env": [{"name": "B", "value": "22"}, {"name": "C", "value": "3"}]}]}}}}).encode()
    out = patch.strategic_merge_patch(job(), body, JOB)
    env = containers(out)[0]["env"]
    assert {e["name"]: e["value"] for e in env} == {"A": "1", "B": "22", "C": "3"}
    # No $setElementOrder: patch items in patch order, server-only ones slotted by live order.
    assert [e["name"] for e in env] == ["A", "B", "C"]


def test_smp_set_element_order_orders_the_result():
    # The design proposal's example (env with server-added items), as kube's code orders it.
    original = job()
    containers(original)[0]["env"] = [{"name": n, "value": n.lower()} for n in
                                      ("ENV2", "ENV5", "ENV1", "ENV3", "ENV4")]
    body = {"spec": {"template": {"spec": {"containers": [{
        "name": "c",
        "$setElementOrder/env": [{"name": "ENV1"}, {"name": "ENV2"}, {"name": "ENV6"}],
        "env": [{"name": "ENV3", "$patch": "delete"}, {"name": "ENV6", "value": "new"}],
    }]}}}}
    out = patch.strategic_merge_patch(original, body, JOB)
    env = containers(out)[0]["env"]
    assert [e["name"] for e in env] == ["ENV5", "ENV1", "ENV2", "ENV6", "ENV4"]
    assert all("$patch" not in e for e in env)
    assert "$setElementOrder/env" not in containers(out)[0]


def test_smp_set_element_order_alone_reorders():
    original = job()
    containers(original).append({"name": "d", "image": "i"})
    body = {"spec": {"template": {"spec": {"$setElementOrder/containers": [{"name": "d"}, {"name": "c"}]}}}}
    out = patch.strategic_merge_patch(original, body, JOB)
    assert [c["name"] for c in containers(out)] == ["d", "c"]
    assert containers(out)[1]["image"] == "busybox"


def test_smp_patch_delete_and_replace_in_lists():
    original = job()
    containers(original).append({"name": "d", "image": "i"})
    out = patch.strategic_merge_patch(original, {"spec": {"template": {"spec": {
        "containers": [{"name": "c", "$patch": "delete"}]}}}}, JOB)
    assert [c["name"] for c in containers(out)] == ["d"]
    out = patch.strategic_merge_patch(original, {"spec": {"template": {"spec": {
        "containers": [{"$patch": "replace"}, {"name": "z", "image": "zz"}]}}}}, JOB)
    assert containers(out) == [{"name": "z", "image": "zz"}]


def test_smp_new_items_come_first_without_order_directive():
    # kube's ordering without $setElementOrder: items named by the patch, then server-only
    # items only where the live list put them before a patch item.
    out = patch.strategic_merge_patch(job(), {"spec": {"template": {"spec": {
        "containers": [{"name": "new", "image": "n"}]}}}}, JOB)
    assert [c["name"] for c in containers(out)] == ["new", "c"]


def test_smp_maps_merge_null_deletes_and_patch_replace_on_maps():
    out = patch.strategic_merge_patch(job(), {"metadata": {"labels": {"a": None, "c": "3"}}}, JOB)
    assert out["metadata"]["labels"] == {"b": "2", "c": "3"}
    out = patch.strategic_merge_patch(job(), {"metadata": {"labels": None}}, JOB)
    assert "labels" not in out["metadata"]
    out = patch.strategic_merge_patch(job(), {"metadata": {"labels": {"$patch": "replace", "z": "9"}}}, JOB)
    assert out["metadata"]["labels"] == {"z": "9"}
    out = patch.strategic_merge_patch(job(), {"metadata": {"labels": {"$patch": "delete"}}}, JOB)
    assert out["metadata"]["labels"] == {}


def test_smp_job_status_conditions_merge_by_type():
    body = {"status": {"conditions": [{"type": "Complete", "status": "True", "reason": "Done"},
                                      {"type": "SuccessCriteriaMet", "status": "True"}]}}
    out = patch.strategic_merge_patch(job(), body, JOB)
    by_type = {c["type"]: c for c in out["status"]["conditions"]}
    assert set(by_type) == {"Suspended", "Complete", "SuccessCriteriaMet"}
    assert by_type["Complete"] == {"type": "Complete", "status": "True", "reason": "Done"}
    assert by_type["Suspended"]["reason"] == "R1"


def test_smp_endpoints_subsets_are_replaced_whole():
    original = {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "e"},
                "subsets": [{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 80}]},
                            {"addresses": [{"ip": "10.0.0.2"}], "ports": [{"port": 81}]}]}
    out = patch.strategic_merge_patch(original, {"subsets": [{"addresses": [{"ip": "10.0.0.9"}]}]}, ENDPOINTS)
    assert out["subsets"] == [{"addresses": [{"ip": "10.0.0.9"}]}]


def test_smp_primitive_lists():
    # finalizers: strategy merge, no merge key -> union, $deleteFromPrimitiveList removes.
    out = patch.strategic_merge_patch(job(), {"metadata": {"finalizers": ["f3", "f1"]}}, JOB)
    assert sorted(out["metadata"]["finalizers"]) == ["f1", "f2", "f3"]
    out = patch.strategic_merge_patch(job(), {"metadata": {
        "$deleteFromPrimitiveList/finalizers": ["f1"], "finalizers": ["f9"]}}, JOB)
    assert sorted(out["metadata"]["finalizers"]) == ["f2", "f9"]
    out = patch.strategic_merge_patch(job(), {"metadata": {
        "$setElementOrder/finalizers": ["f2", "f1"]}}, JOB)
    assert out["metadata"]["finalizers"] == ["f2", "f1"]
    # command: no strategy -> replaced.
    out = patch.strategic_merge_patch(job(), {"spec": {"template": {"spec": {"containers": [
        {"name": "c", "command": ["new"]}]}}}}, JOB)
    assert containers(out)[0]["command"] == ["new"]


def test_smp_retain_keys():
    body = {"spec": {"template": {"spec": {"volumes": [
        {"name": "v", "$retainKeys": ["hostPath", "name"], "hostPath": {"path": "/tmp"}}]}}}}
    out = patch.strategic_merge_patch(job(), body, JOB)
    assert out["spec"]["template"]["spec"]["volumes"] == [{"name": "v", "hostPath": {"path": "/tmp"}}]
    body["spec"]["template"]["spec"]["volumes"][0]["$retainKeys"] = ["name"]
    err = raises(400, patch.strategic_merge_patch, job(), body, JOB)
    assert err.message == "invalid patch format of retainKeys"


def test_smp_adds_missing_lists_and_cleans_directives():
    original = job()
    del containers(original)[0]["env"]
    out = patch.strategic_merge_patch(original, {"spec": {"template": {"spec": {"containers": [
        {"name": "c", "$setElementOrder/env": [{"name": "X"}], "env": [{"name": "X", "value": "1"}]}]}}}}, JOB)
    assert containers(out)[0]["env"] == [{"name": "X", "value": "1"}]
    assert "$setElementOrder/env" not in containers(out)[0]


def test_smp_unknown_fields_pass_through_for_decode_to_judge():
    out = patch.strategic_merge_patch(job(), {"spec": {"bogus": {"x": 1}}}, JOB)
    assert out["spec"]["bogus"] == {"x": 1}
    _, unknown = schema.decode(out, JOB)
    assert unknown == ["spec.bogus"]


@pytest.mark.parametrize("body, code, text", [
    ([], 400, "json: cannot unmarshal array into Go value of type map[string]interface {}"),
    ({"metadata": {"labels": {"$patch": "bogus"}}}, 400, "unknown patch type: bogus"),
    ({"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}}, 400,
     "does not contain declared merge key: name"),
    ({"spec": {"template": {"spec": {"containers": [{"$patch": "delete"}]}}}}, 400,
     "does not contain declared merge key: name"),
    ({"spec": {"template": {"spec": {"containers": [{"name": "c", "$patch": "merge"}]}}}}, 400,
     "merging lists cannot yet be specified in the patch"),
    ({"metadata": {"$deleteFromPrimitiveList/finalizers": "f1"}}, 400, "invalid patch format of primitive list"),
    ({"metadata": {"$setElementOrder/finalizers": "f1"}}, 400, "invalid patch format of setElementOrder list"),
    ({"metadata": {"finalizers": [["nested"]]}}, 422, "lists of lists are not supported"),
])
def test_smp_errors(body, code, text):
    err = raises(code, patch.strategic_merge_patch, job(), body, JOB)
    assert text in json.dumps(err.status())


# =========================================================================== json / merge patch

def test_json_patch_applies():
    ops = [{"op": "replace", "path": "/spec/holderIdentity", "value": "h2"},
           {"op": "add", "path": "/metadata/labels/new", "value": "v"},
           {"op": "remove", "path": "/spec/leaseTransitions"},
           {"op": "test", "path": "/spec/leaseDurationSeconds", "value": 15}]
    original = lease()
    out = patch.json_patch(original, json.dumps(ops).encode())
    assert out["spec"]["holderIdentity"] == "h2" and "leaseTransitions" not in out["spec"]
    assert out["metadata"]["labels"]["new"] == "v"
    assert original == lease()


@pytest.mark.parametrize("ops", [
    [{"op": "test", "path": "/spec/holderIdentity", "value": "someone-else"}],
    [{"op": "replace", "path": "/spec/missing/deeper", "value": 1}],
    [{"op": "remove", "path": "/spec/nothere"}],
    [{"op": "frobnicate", "path": "/spec"}],
    [{"path": "/spec"}],
    [{"op": "add", "path": "no-slash", "value": 1}],
])
def test_json_patch_that_does_not_apply_is_422(ops):
    err = raises(422, patch.json_patch, lease(), ops)
    assert err.reason == "Invalid"
    assert err.message == "the server rejected our request due to an error in our request"
    assert err.details["causes"][0]["message"]


@pytest.mark.parametrize("body", [b'{"op": "add"}', b'"x"', b"[1]", b"[{"])
def test_json_patch_malformed_is_400(body):
    err = raises(400, patch.json_patch, lease(), body)
    assert err.reason == "BadRequest"


def test_json_patch_operation_limit_is_413():
    ops = [{"op": "test", "path": "/kind", "value": "Lease"}] * (patch.MAX_JSON_PATCH_OPERATIONS + 1)
    raises(413, patch.json_patch, lease(), ops)


def test_merge_patch_rfc7386():
    original = lease()
    out = patch.merge_patch(original, {"spec": {"holderIdentity": None, "leaseTransitions": 3},
                                       "metadata": {"labels": {"app": None, "b": "c"}}})
    assert "holderIdentity" not in out["spec"] and out["spec"]["leaseTransitions"] == 3
    assert out["spec"]["leaseDurationSeconds"] == 15
    assert out["metadata"]["labels"] == {"b": "c"}
    assert original == lease()
    # Lists are replaced whole; a non-object replaces the target.
    assert patch.merge_patch({"a": [1, 2]}, {"a": [3]}) == {"a": [3]}
    assert patch.merge_patch({"a": {"b": 1}}, {"a": "x"}) == {"a": "x"}
    assert patch.merge_patch({"a": 1}, {"b": {"c": None}}) == {"a": 1, "b": {}}


# =========================================================================== dispatch

def test_apply_patch_dispatches_on_content_type():
    body = json.dumps({"spec": {"holderIdentity": "h9"}}).encode()
    for ctype in ("application/merge-patch+json", "application/strategic-merge-patch+json; charset=utf-8",
                  "Application/Merge-Patch+JSON"):
        out = patch.apply_patch(lease(), body, ctype, LEASE)
        assert out["spec"]["holderIdentity"] == "h9"
    ops = b'[{"op":"replace","path":"/spec/holderIdentity","value":"h8"}]'
    assert patch.apply_patch(lease(), ops, "application/json-patch+json", LEASE)["spec"]["holderIdentity"] == "h8"
    # SMP keeps the container image, merge patch replaces the list.
    smp = patch.apply_patch(job(), json.dumps(KUBECTL_APPLY_BODY).encode(),
                            "application/strategic-merge-patch+json", JOB)
    assert containers(smp)[0]["image"] == "busybox"
    merge = patch.apply_patch(job(), json.dumps(KUBECTL_APPLY_BODY).encode(),
                              "application/merge-patch+json", JOB)
    assert "image" not in containers(merge)[0]


def test_apply_patch_errors():
    err = raises(400, patch.apply_patch, lease(), b"{not json", "application/merge-patch+json", LEASE)
    assert err.message.startswith("error decoding patch:")
    raises(400, patch.apply_patch, lease(), b"", "application/strategic-merge-patch+json", LEASE)
    raises(400, patch.apply_patch, lease(), b"[]", "application/merge-patch+json", LEASE)
    err = raises(415, patch.apply_patch, lease(), b"{}", "text/plain", LEASE)
    assert err.reason == "UnsupportedMediaType"
    for t in patch.SUPPORTED_PATCH_TYPES:
        assert t in err.message
    raises(415, patch.apply_patch, lease(), b"{}", "", LEASE)
    with pytest.raises(ValueError):
        patch.apply_patch(lease(), b"{}", "application/apply-patch+yaml", LEASE)
    assert patch.patch_type("application/apply-patch+yaml; charset=utf-8") == patch.APPLY_PATCH


def test_patch_invalid_is_kube_shaped_422():
    try:
        schema.decode({"spec": {"leaseDurationSeconds": "x"}}, LEASE)
    except schema.DecodeError as exc:
        err = codec.patch_invalid(exc.detail, {"spec": {"leaseDurationSeconds": "x"}})
    assert err.code == 422 and err.reason == "Invalid"
    assert err.message.startswith(' "" is invalid: patch: Invalid value: "{')
    assert err.message.endswith("of type int32")
    assert err.details["causes"][0]["field"] == "patch"


# =========================================================================== openapi

@pytest.fixture
def kinds():
    """Register the three kinds (model=None), restoring the registry afterwards."""
    saved = dict(registry._by_path), dict(registry._by_kind)
    registry.register(Resource(group="coordination.k8s.io", version="v1", kind="Lease", plural="leases",
                               singular="lease", model=None, definition=LEASE))
    registry.register(Resource(group="", version="v1", kind="Endpoints", plural="endpoints",
                               singular="endpoints", model=None, definition=ENDPOINTS, short_names=("ep",)))
    registry.register(Resource(group="batch", version="v1", kind="Job", plural="jobs", singular="job",
                               model=None, definition=JOB, has_status=True, categories=("all",)))
    yield
    registry._by_path.clear()
    registry._by_path.update(saved[0])
    registry._by_kind.clear()
    registry._by_kind.update(saved[1])


def v3(gv: str) -> dict:
    data, _ = openapi.v3_group_version(gv)
    return json.loads(data)


def walk(node, fn):
    fn(node)
    if isinstance(node, dict):
        for v in node.values():
            walk(v, fn)
    elif isinstance(node, list):
        for v in node:
            walk(v, fn)


def test_v3_root_lists_each_group_version_with_its_hash(kinds):
    root = openapi.v3_root()
    assert set(root["paths"]) == {"api/v1", "apis/coordination.k8s.io/v1", "apis/batch/v1", "apis/events.k8s.io/v1",
                                  "apis/authorization.k8s.io/v1", "apis/authentication.k8s.io/v1"}  # (+ Events, reviews)
    for gv, entry in root["paths"].items():
        data, digest = openapi.v3_group_version(gv)
        assert entry["serverRelativeURL"] == f"/openapi/v3/{gv}?hash={digest}"
    assert openapi.v3_root() == root                                 # stable
    assert openapi.v3_group_version("/apis/batch/v1")[1] == openapi.v3_group_version("apis/batch/v1")[1]
    assert openapi.v3_group_version("apis/apps/v1") is None


def test_v3_patch_operations_advertise_field_validation_and_patch_types(kinds):
    for gv, kinds_here in (("api/v1", {"Endpoints", "Event"}), ("apis/coordination.k8s.io/v1", {"Lease"}),
                           ("apis/batch/v1", {"Job"})):
        doc = v3(gv)
        assert doc["openapi"].startswith("3.0")
        patches = [(p, ops["patch"]) for p, ops in doc["paths"].items() if "patch" in ops]
        assert patches
        for path, op in patches:
            names = {p["name"] for p in op["parameters"] if p["in"] == "query"}
            assert {"fieldValidation", "fieldManager", "dryRun", "force"} <= names, path
            assert op["x-kubernetes-group-version-kind"]["kind"] in kinds_here
            assert isinstance(op["x-kubernetes-group-version-kind"], dict)
            assert op["x-kubernetes-action"] == "patch"
            assert set(op["requestBody"]["content"]) == {
                "application/json-patch+json", "application/merge-patch+json",
                "application/strategic-merge-patch+json", "application/apply-patch+yaml"}


def test_v3_access_reviews_are_create_only(kinds):
    paths = v3("apis/authorization.k8s.io/v1")["paths"]
    op = paths["/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"]
    assert set(op) == {"post", "parameters"}
    assert op["post"]["x-kubernetes-group-version-kind"] == {"group": "authorization.k8s.io",
                                                             "kind": "SelfSubjectAccessReview", "version": "v1"}
    assert "io.k8s.api.authorization.v1.SubjectAccessReviewStatus" in v3("apis/authorization.k8s.io/v1")[
        "components"]["schemas"]


def test_v3_paths_and_parameters(kinds):
    paths = v3("apis/batch/v1")["paths"]
    ns = "/apis/batch/v1/namespaces/{namespace}/jobs"
    assert set(paths) == {ns, "/apis/batch/v1/jobs", ns + "/{name}", ns + "/{name}/status"}
    assert set(paths[ns]) >= {"get", "post", "delete", "parameters"}
    assert set(paths[ns + "/{name}"]) >= {"get", "put", "patch", "delete"}
    assert set(paths[ns + "/{name}/status"]) >= {"get", "put", "patch"}
    assert paths[ns]["delete"]["x-kubernetes-action"] == "deletecollection"
    list_params = {p["name"] for p in paths[ns]["get"]["parameters"]}
    assert {"labelSelector", "fieldSelector", "limit", "continue", "resourceVersion", "resourceVersionMatch",
            "watch", "allowWatchBookmarks", "sendInitialEvents", "timeoutSeconds"} <= list_params
    delete_params = {p["name"] for p in paths[ns + "/{name}"]["delete"]["parameters"]}
    assert {"gracePeriodSeconds", "propagationPolicy", "dryRun"} <= delete_params
    create_params = {p["name"] for p in paths[ns]["post"]["parameters"]}
    assert {"fieldValidation", "fieldManager", "dryRun"} <= create_params
    assert {p["name"] for p in paths[ns + "/{name}"]["parameters"]} == {"name", "namespace", "pretty"}
    assert "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}/status" not in \
        v3("apis/coordination.k8s.io/v1")["paths"]


def test_v3_schemas_are_openapi_shaped_and_complete(kinds):
    doc = v3("apis/batch/v1")
    schemas = doc["components"]["schemas"]
    for name in (JOB, JOB + "List", "io.k8s.api.core.v1.PodSpec", "io.k8s.api.core.v1.Container",
                 "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta",
                 "io.k8s.apimachinery.pkg.apis.meta.v1.Status", "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"):
        assert name in schemas, name
    containers_schema = schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
    assert containers_schema["x-kubernetes-patch-merge-key"] == "name"
    assert containers_schema["x-kubernetes-patch-strategy"] == "merge"
    assert containers_schema["items"] == {"$ref": "#/components/schemas/io.k8s.api.core.v1.Container"}
    assert schemas[JOB]["x-kubernetes-group-version-kind"] == [{"group": "batch", "kind": "Job", "version": "v1"}]
    assert "enum" not in schemas[JOB]["properties"]["kind"]
    assert schemas[JOB]["properties"]["spec"]["allOf"] == [{"$ref": "#/components/schemas/io.k8s.api.batch.v1.JobSpec"}]
    assert schemas["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]["format"] == "int-or-string"
    labels = schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]["properties"]["labels"]
    assert labels == {"additionalProperties": {"type": "string"}, "description": labels["description"],
                      "type": "object"}

    def check(node):
        if isinstance(node, dict):
            assert not isinstance(node.get("type"), list), node
            assert node.get("additionalProperties") is not False
            assert None not in node.get("enum", [None] * 0)
            ref = node.get("$ref")
            if ref is not None:
                assert ref.startswith("#/components/schemas/") and ref.rsplit("/", 1)[1] in schemas, ref
    walk(doc, check)


def test_v3_lease_explain_schema(kinds):
    schemas = v3("apis/coordination.k8s.io/v1")["components"]["schemas"]
    spec = schemas["io.k8s.api.coordination.v1.LeaseSpec"]
    assert spec["properties"]["leaseDurationSeconds"] == {
        "description": spec["properties"]["leaseDurationSeconds"]["description"],
        "format": "int32", "type": "integer"}
    assert "description" in schemas[LEASE]


def test_v2_document(kinds):
    doc = json.loads(openapi.v2())
    assert doc["swagger"] == "2.0"
    assert "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}" in doc["paths"]
    assert "/api/v1/namespaces/{namespace}/endpoints" in doc["paths"]
    op = doc["paths"]["/apis/batch/v1/namespaces/{namespace}/jobs/{name}"]["patch"]
    assert "fieldValidation" in {p["name"] for p in op["parameters"]}
    assert "application/strategic-merge-patch+json" in op["consumes"]
    defs = doc["definitions"]
    assert defs["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]["x-kubernetes-patch-merge-key"] == "name"

    def check(node):
        if isinstance(node, dict) and "$ref" in node:
            assert node["$ref"].startswith("#/definitions/") and node["$ref"].rsplit("/", 1)[1] in defs
    walk(doc, check)
