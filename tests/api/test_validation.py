"""Generic validation rules (kube-apiserver 1.32): names, labels, annotations, IPs, ObjectMeta,
semantic equality.

Plain functions on dicts: no database, no Django settings.
"""
from __future__ import annotations

from dashboard.kube import validation as v
from rule_helpers import LABEL_MSG, SUBDOMAIN_MSG, UID, fields, reasons, texts


def test_dns_names():
    assert v.is_dns1123_subdomain("a.b-c.d") == []
    assert v.is_dns1123_subdomain("Bad_Name") == [SUBDOMAIN_MSG]
    assert v.is_dns1123_subdomain("a" * 254) == ["must be no more than 253 characters"]
    assert v.is_dns1123_label("a.b") == [LABEL_MSG]
    assert v.is_dns1123_label("a" * 64) == ["must be no more than 63 characters"]
    assert v.is_dns1123_subdomain("abc\n") != []          # no trailing newline, unlike Python's $
    assert v.name_is_dns_subdomain("gen-", prefix=True) == []


def test_qualified_names_and_label_values():
    assert v.is_qualified_name("example.com/My_Name-1") == []
    assert v.is_qualified_name("/x") == ["prefix part must be non-empty"]
    assert v.is_qualified_name("x/") == ["name part must be non-empty", "name part must consist of alphanumeric "
                                         "characters, '-', '_' or '.', and must start and end with an alphanumeric "
                                         "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
                                         "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
                                         .replace(",  or", " or")]
    assert v.is_qualified_name("a/b/c")[0].startswith("a qualified name must consist of")
    assert v.is_qualified_name("Bad.Prefix/x")[0].startswith("prefix part a lowercase RFC 1123 subdomain")
    assert v.is_qualified_name("a" * 64) == ["name part must be no more than 63 characters"]
    assert v.is_valid_label_value("") == []
    assert v.is_valid_label_value("-x")[0].startswith("a valid label must be an empty string")


def test_labels_and_annotations():
    causes = v.validate_labels({"ok": "fine", "bad key!": "x", "k": "bad value!"}, "metadata.labels")
    assert fields(causes) == ["metadata.labels", "metadata.labels"]
    assert causes[0]["message"].startswith('Invalid value: "bad key!": name part must consist of')
    assert causes[1]["message"].startswith('Invalid value: "bad value!": a valid label must be')
    assert v.validate_annotations({"Example.COM/Key": "anything at all"}, "metadata.annotations") == []
    big = {"a": "x" * (256 * 1024)}
    assert texts(v.validate_annotations(big, "metadata.annotations")) == [
        "metadata.annotations: Too long: may not be more than 262144 bytes"]
    assert reasons(v.validate_annotations(big, "m")) == ["FieldValueTooLong"]
    assert v.validate_annotations({"a": "x" * (256 * 1024 - 1)}, "m") == []


def test_ip_parsing():
    assert str(v.parse_ip("010.001.002.003")) == "10.1.2.3"        # ParseIPSloppy
    assert str(v.parse_ip("2001:db8::1")) == "2001:db8::1"
    assert str(v.parse_ip("::ffff:127.0.0.1")) == "127.0.0.1"
    for bad in ("", "1.2.3", "1.2.3.256", "fe80::1%eth0", "[::1]", " 1.2.3.4", "x", "1.2.3.4/32"):
        assert v.parse_ip(bad) is None, bad


def test_non_special_ips():
    def msgs(ip):
        return [c["message"] for c in v.validate_non_special_ip(ip, "ip")]
    assert msgs("10.0.0.1") == [] and msgs("2001:db8::1") == []
    assert msgs("0.0.0.0") == ['Invalid value: "0.0.0.0": may not be unspecified (0.0.0.0)']
    assert msgs("::") == ['Invalid value: "::": may not be unspecified (::)']
    assert msgs("127.0.0.2") == ['Invalid value: "127.0.0.2": may not be in the loopback range (127.0.0.0/8, ::1/128)']
    assert msgs("::1") == ['Invalid value: "::1": may not be in the loopback range (127.0.0.0/8, ::1/128)']
    assert msgs("::ffff:127.0.0.1")[0].endswith("loopback range (127.0.0.0/8, ::1/128)")
    assert msgs("169.254.169.254") == ['Invalid value: "169.254.169.254": may not be in the link-local range '
                                       '(169.254.0.0/16, fe80::/10)']
    assert msgs("fe80::1")[0].endswith("link-local range (169.254.0.0/16, fe80::/10)")
    assert msgs("224.0.0.1")[0].endswith("link-local multicast range (224.0.0.0/24, ff02::/10)")
    assert msgs("ff02::1")[0].endswith("link-local multicast range (224.0.0.0/24, ff02::/10)")
    assert msgs("224.0.1.1") == []                                   # multicast, but not link-local


# ObjectMeta ---------------------------------------------------------------------------

def test_object_meta_valid():
    meta = {"name": "my-obj", "namespace": "default", "labels": {"app": "x"},
            "annotations": {"example.com/note": "hi"}, "finalizers": ["example.com/cleanup"],
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "uid": UID,
                                 "controller": True}]}
    assert v.validate_object_meta(meta, namespaced=True) == []


def test_object_meta_names():
    assert texts(v.validate_object_meta({"namespace": "default"}, True)) == [
        "metadata.name: Required value: name or generateName is required"]
    assert v.validate_object_meta({"generateName": "job-", "namespace": "default"}, True) == []
    assert texts(v.validate_object_meta({"name": "Bad_Name", "namespace": "default"}, True)) == [
        f'metadata.name: Invalid value: "Bad_Name": {SUBDOMAIN_MSG}']
    assert fields(v.validate_object_meta({"generateName": "Bad_", "namespace": "d"}, True)) == ["metadata.generateName"]
    assert texts(v.validate_object_meta({"name": "a"}, True)) == ["metadata.namespace: Required value"]
    assert fields(v.validate_object_meta({"name": "a", "namespace": "a.b"}, True)) == ["metadata.namespace"]
    assert texts(v.validate_object_meta({"name": "a", "namespace": "x"}, False)) == [
        "metadata.namespace: Forbidden: not allowed on this type"]


def test_object_meta_finalizers_and_owners():
    causes = v.validate_object_meta({"name": "a", "namespace": "d", "finalizers": ["orphan", "foregroundDeletion",
                                                                                  "bad/name/x"]}, True)
    assert fields(causes) == ["metadata.finalizers", "metadata.finalizers"]
    assert causes[1]["message"].endswith("finalizer orphan and foregroundDeletion cannot be both set")
    refs = [{"apiVersion": "", "kind": "", "name": "", "uid": ""},
            {"apiVersion": "v1", "kind": "Event", "name": "e", "uid": "u"},
            {"apiVersion": "v1", "kind": "A", "name": "a", "uid": "1", "controller": True},
            {"apiVersion": "v1", "kind": "B", "name": "b", "uid": "2", "controller": True}]
    causes = v.validate_object_meta({"name": "a", "namespace": "d", "ownerReferences": refs}, True)
    assert texts(causes)[:4] == [
        'metadata.ownerReferences.apiVersion: Invalid value: "": version must not be empty',
        'metadata.ownerReferences.kind: Invalid value: "": kind must not be empty',
        'metadata.ownerReferences.name: Invalid value: "": name must not be empty',
        'metadata.ownerReferences.uid: Invalid value: "": uid must not be empty']
    assert causes[4]["message"].endswith("/v1, Kind=Event is disallowed from being an owner")
    assert causes[5]["message"].endswith('Only one reference can have Controller set to true. Found "true" in '
                                         "references for A/a and B/b")


def test_object_meta_update():
    old = {"name": "a", "namespace": "d", "uid": UID, "creationTimestamp": "2026-01-01T00:00:00Z"}
    assert v.validate_object_meta_update(dict(old, labels={"x": "y"}), old) == []
    causes = v.validate_object_meta_update(dict(old, name="b", namespace="e"), old)
    assert texts(causes) == ['metadata.name: Invalid value: "b": field is immutable',
                             'metadata.namespace: Invalid value: "e": field is immutable']
    deleting = dict(old, deletionTimestamp="2026-01-02T00:00:00Z", finalizers=["a/x", "a/y"])
    assert v.validate_object_meta_update(dict(deleting, finalizers=["a/x"]), deleting) == []
    assert texts(v.validate_object_meta_update(dict(deleting, finalizers=["a/x", "a/z"]), deleting)) == [
        'metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, '
        'found new finalizers []string{"a/z"}']


# Semantic comparison ------------------------------------------------------------------

def test_semantic_equal_knows_structs_from_maps():
    pfp = "io.k8s.api.batch.v1.PodFailurePolicy"
    assert not v.semantic_equal({"rules": []}, None, pfp)          # a set pointer is not nil
    assert v.semantic_equal({"rules": []}, {}, pfp)                 # empty slice == nil slice
    template = "io.k8s.api.core.v1.PodTemplateSpec"
    a = {"metadata": {"labels": {}}, "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "1"}}}]}}
    b = {"metadata": {}, "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "1000m"}}}]}}
    assert v.semantic_equal(a, b, template)                         # empty map == nil; 1 == 1000m
    b["spec"]["securityContext"] = {}
    assert not v.semantic_equal(a, b, template)
    assert v.semantic_equal({"x": []}, {})                          # without a schema: loose
