"""Validation and defaulting rules (kube-apiserver 1.32) for ObjectMeta, Lease, Endpoints and Job.

Plain functions on dicts: no database, no Django settings.
"""
from __future__ import annotations

import copy
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, strategies as st

from dashboard.batch import strategy as jobs
from dashboard.coordination import strategy as leases
from dashboard.core import strategy as endpoints
from dashboard.kube import formats, validation as v
from dashboard.kube.errors import ApiError

UID = "3f0c8e0a-5d2e-4e55-9d55-0a6a2f3d1b7c"
NOW = datetime(2026, 11, 22, 12, 0, 0, tzinfo=timezone.utc)


def texts(causes) -> list[str]:
    return [c.text for c in causes]


def fields(causes) -> list[str]:
    return [c["field"] for c in causes]


def reasons(causes) -> list[str]:
    return [c["reason"] for c in causes]


# =======================================================================================
# Generic helpers
# =======================================================================================

SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                 "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                 r"validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
             "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
             "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')").replace(",  or", " or")


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


# ObjectMeta ------------------------------------------------------------------------------

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


# Value formats ---------------------------------------------------------------------------

@pytest.mark.parametrize("text,expected", [
    ("2026-11-22T03:00:00.123456Z", "2026-11-22T03:00:00.123456Z"),
    ("2026-11-22T03:00:00.000000+02:00", "2026-11-22T01:00:00.000000Z"),
    ("2026-11-22T03:00:00,500000-01:30", "2026-11-22T04:30:00.500000Z"),   # Go accepts a comma
    ("2024-02-29T23:59:59.999999Z", "2024-02-29T23:59:59.999999Z"),
])
def test_micro_time_normalization(text, expected):
    assert formats.normalize_micro_time(text) == expected


@pytest.mark.parametrize("text,message", [
    ("x", 'parsing time "x" as "2006-01-02T15:04:05.000000Z07:00": cannot parse "x" as "2006"'),
    ("2026-11-22T03:00:00Z", 'parsing time "2026-11-22T03:00:00Z" as "2006-01-02T15:04:05.000000Z07:00": '
                             'cannot parse "Z" as ".000000"'),
    ("2026-11-22T03:00:00.123Z", 'parsing time "2026-11-22T03:00:00.123Z" as "2006-01-02T15:04:05.000000Z07:00": '
                                 'cannot parse ".123Z" as ".000000"'),
    ("2026-11-22 03:00:00.000000Z", 'parsing time "2026-11-22 03:00:00.000000Z" as '
                                    '"2006-01-02T15:04:05.000000Z07:00": cannot parse " 03:00:00.000000Z" as "T"'),
    ("2026-11-22T03:00:00.000000", 'parsing time "2026-11-22T03:00:00.000000" as '
                                   '"2006-01-02T15:04:05.000000Z07:00": cannot parse "" as "Z07:00"'),
    ("2026-13-01T00:00:00.000000Z", 'parsing time "2026-13-01T00:00:00.000000Z": month out of range'),
    ("2026-02-29T00:00:00.000000Z", 'parsing time "2026-02-29T00:00:00.000000Z": day out of range'),
    ("2026-01-01T24:00:00.000000Z", 'parsing time "2026-01-01T24:00:00.000000Z": hour out of range'),
    ("2026-01-01T00:00:00.000000Zz", 'parsing time "2026-01-01T00:00:00.000000Zz": extra text: "z"'),
])
def test_micro_time_errors(text, message):
    with pytest.raises(formats.FormatError) as exc:
        formats.normalize_micro_time(text)
    assert str(exc.value) == message


def test_time_normalization():
    assert formats.normalize_time("2026-11-22T03:00:00Z") == "2026-11-22T03:00:00Z"
    assert formats.normalize_time("2026-11-22T03:00:00.987654321+01:00") == "2026-11-22T02:00:00Z"   # seconds only
    with pytest.raises(formats.FormatError, match=r'cannot parse "" as "2006"'):
        formats.normalize_time("")
    assert formats.parse_time_lenient("2026-11-22T03:00:00.5Z") == datetime(2026, 11, 22, 3, 0, 0, 500000,
                                                                         tzinfo=timezone.utc)
    assert formats.parse_time_lenient("nope") is None and formats.parse_time_lenient(None) is None


@pytest.mark.parametrize("given,canonical", [
    ("100m", "100m"), ("0.1", "100m"), ("1000m", "1"), ("1.5", "1500m"), (0.5, "500m"), (2, "2"),
    ("1000", "1k"), ("1Gi", "1Gi"), ("1024Mi", "1Gi"), ("1.5Gi", "1536Mi"), ("1.5Ki", "1536"),
    ("512", "512"), ("0.5Gi", "512Mi"), ("129e6", "129e6"), ("1.5e3", "1500"), ("1E", "1E"),
    ("0", "0"), ("-0", "0"), ("0Gi", "0"), ("1e-12", "1e-9"), ("0.0000000001", "1n"), ("-1Gi", "-1Gi"),
    ("12345678901234567890", "12345678901234567890"), ("+1k", "1k"), (" 1 ", "1"), ("1.", "1"), (".5", "500m"),
])
def test_quantity_canonical(given, canonical):
    assert formats.canonical_quantity(given) == canonical


@pytest.mark.parametrize("bad,message", [
    ("", formats.QUANTITY_FORMAT_ERROR), ("abc", formats.QUANTITY_FORMAT_ERROR), ("1Gb", formats.QUANTITY_FORMAT_ERROR),
    ("1K", formats.QUANTITY_SUFFIX_ERROR), ("1e", formats.QUANTITY_SUFFIX_ERROR), ("1mi", formats.QUANTITY_SUFFIX_ERROR),
])
def test_quantity_errors(bad, message):
    with pytest.raises(formats.FormatError) as exc:
        formats.parse_quantity(bad)
    assert str(exc.value) == message


def test_quantity_compare():
    q = formats.parse_quantity
    assert q("500m").compare(q("0.5")) == 0
    assert q("1Gi").compare(q("1G")) == 1
    assert q("-1").compare(q("1m")) == -1
    assert q("1e100000000").compare(q("1e99999999")) == 1      # no huge integers involved


@given(st.integers(min_value=-10 ** 12, max_value=10 ** 12), st.integers(min_value=-9, max_value=12),
       st.sampled_from(["", "m", "k", "Ki", "Mi", "e3", "u"]))
def test_quantity_canonical_is_stable(mantissa, exponent, suffix):
    text = f"{mantissa}{suffix}" if suffix else f"{mantissa}e{exponent}"
    once = formats.canonical_quantity(text)
    assert formats.canonical_quantity(once) == once
    assert formats.parse_quantity(once).compare(formats.parse_quantity(text)) == 0


# =======================================================================================
# Lease
# =======================================================================================

def lease(**spec):
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "l1", "namespace": "default"},
            "spec": {"holderIdentity": "node-a", "leaseDurationSeconds": 15,
                     "acquireTime": "2026-11-22T03:00:00.000000Z", "renewTime": "2026-11-22T03:00:10.250000Z",
                     "leaseTransitions": 0, **spec}}


def test_lease_valid_and_normalized():
    obj = lease(renewTime="2026-11-22T05:00:10.250000+02:00")
    leases.default(obj)
    assert obj["spec"]["renewTime"] == "2026-11-22T03:00:10.250000Z"
    assert leases.validate(obj) == [] and leases.validate_update(obj, lease()) == []
    empty = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "x"}}
    leases.default(empty)
    assert empty["spec"] == {} and leases.validate(empty) == []


def test_lease_bad_micro_time_is_400():
    obj = lease(renewTime="2026-11-22T03:00:10Z")
    with pytest.raises(ApiError) as exc:
        leases.default(obj)
    assert exc.value.code == 400 and exc.value.reason == "BadRequest"
    assert exc.value.message == ('Lease in version "v1" cannot be handled as a Lease: parsing time '
                                 '"2026-11-22T03:00:10Z" as "2006-01-02T15:04:05.000000Z07:00": '
                                 'cannot parse "Z" as ".000000"')


def test_lease_spec_rules():
    assert texts(leases.validate(lease(leaseDurationSeconds=0))) == [
        "spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0"]
    assert texts(leases.validate(lease(leaseDurationSeconds=-5, leaseTransitions=-1))) == [
        "spec.leaseDurationSeconds: Invalid value: -5: must be greater than 0",
        "spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0"]
    assert leases.validate(lease(strategy="OldestEmulationVersion", preferredHolder="node-b")) == []
    assert leases.validate(lease(strategy="example.com/custom")) == []
    assert texts(leases.validate(lease(strategy="Newest"))) == [
        'spec.strategy.strategy: Unsupported value: "Newest": supported values: "OldestEmulationVersion"']
    assert texts(leases.validate(lease(preferredHolder="node-b"))) == [
        "spec.preferredHolder: Forbidden: may only be specified if `strategy` is defined"]


def test_lease_coordinated_fields_served():
    # kubedash serves 1.32's strategy / preferredHolder (as with CoordinatedLeaderElection on).
    obj = lease(strategy="OldestEmulationVersion", preferredHolder="b")
    leases.prepare_for_create(obj)
    assert obj["spec"]["strategy"] == "OldestEmulationVersion" and obj["spec"]["preferredHolder"] == "b"


def test_lease_coordinated_fields_gated_off(monkeypatch):
    monkeypatch.setattr(leases, "COORDINATED_LEADER_ELECTION", False)
    obj = lease(strategy="OldestEmulationVersion", preferredHolder="b")
    leases.prepare_for_create(obj)
    assert "strategy" not in obj["spec"] and "preferredHolder" not in obj["spec"]
    old = lease(strategy="OldestEmulationVersion")
    new = lease(strategy="OldestEmulationVersion", preferredHolder="b")
    leases.prepare_for_update(new, old)
    assert new["spec"]["strategy"] == "OldestEmulationVersion" and "preferredHolder" not in new["spec"]


def test_lease_columns():
    cols = leases.typed_columns(lease())
    assert cols == {"holder_identity": "node-a", "lease_duration_seconds": 15,
                    "acquire_time": datetime(2026, 11, 22, 3, 0, tzinfo=timezone.utc),
                    "renew_time": datetime(2026, 11, 22, 3, 0, 10, 250000, tzinfo=timezone.utc),
                    "lease_transitions": 0}
    assert leases.typed_columns({"spec": {}})["holder_identity"] == ""
    assert [c.name for c in leases.columns] == ["Holder"]
    assert leases.columns[0].cell(lease(), NOW) == "node-a"
    assert leases.columns[0].cell({"spec": {}}, NOW) == ""


# =======================================================================================
# Endpoints
# =======================================================================================

def eps(*subsets):
    return {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "svc", "namespace": "default"},
            "subsets": list(subsets)}


def test_endpoints_defaults_and_valid():
    obj = eps({"addresses": [{"ip": "10.0.0.1", "hostname": "pod-a", "nodeName": "node-1",
                              "targetRef": {"kind": "Pod", "name": "a", "uid": UID}}],
               "notReadyAddresses": [{"ip": "2001:db8::2"}],
               "ports": [{"name": "http", "port": 80}, {"name": "dns", "port": 53, "protocol": "UDP",
                                                        "appProtocol": "kubernetes.io/h2c"}]},
              {"notReadyAddresses": [{"ip": "10.0.0.9"}]})               # no ports: headless
    endpoints.default(obj)
    assert obj["subsets"][0]["ports"][0]["protocol"] == "TCP"
    assert endpoints.validate(obj) == []
    assert endpoints.validate(eps()) == [] and endpoints.validate_update(obj, obj) == []


def test_endpoints_subset_needs_addresses():
    assert texts(endpoints.validate(eps({"ports": [{"port": 80, "protocol": "TCP"}]}))) == [
        "subsets[0]: Required value: must specify `addresses` or `notReadyAddresses`"]


def test_endpoints_addresses():
    obj = eps({"addresses": [{"ip": "not-an-ip"}, {"ip": "127.0.0.1"}, {"ip": "10.0.0.1", "hostname": "Bad.Host",
                                                                         "nodeName": "Bad_Node"}],
               "notReadyAddresses": [{"ip": "169.254.1.1"}, {"ip": "ff02::1"}, {"ip": "0.0.0.0"}]})
    assert texts(endpoints.validate(obj)) == [
        'subsets[0].addresses[0].ip: Invalid value: "not-an-ip": must be a valid IP address, '
        "(e.g. 10.9.8.7 or 2001:db8::ffff)",
        'subsets[0].addresses[0].ip: Invalid value: "not-an-ip": must be a valid IP address',
        'subsets[0].addresses[1].ip: Invalid value: "127.0.0.1": may not be in the loopback range '
        "(127.0.0.0/8, ::1/128)",
        f'subsets[0].addresses[2].hostname: Invalid value: "Bad.Host": {LABEL_MSG}',
        f'subsets[0].addresses[2].nodeName: Invalid value: "Bad_Node": {SUBDOMAIN_MSG}',
        'subsets[0].notReadyAddresses[0].ip: Invalid value: "169.254.1.1": may not be in the link-local range '
        "(169.254.0.0/16, fe80::/10)",
        'subsets[0].notReadyAddresses[1].ip: Invalid value: "ff02::1": may not be in the link-local multicast '
        "range (224.0.0.0/24, ff02::/10)",
        'subsets[0].notReadyAddresses[2].ip: Invalid value: "0.0.0.0": may not be unspecified (0.0.0.0)']


def test_endpoints_ports():
    obj = eps({"addresses": [{"ip": "10.0.0.1"}],
               "ports": [{"port": 0, "protocol": "TCP"}, {"name": "Web", "port": 70000, "protocol": "HTTP"},
                         {"name": "x", "port": 1, "protocol": "TCP", "appProtocol": "bad/proto/col"}]})
    causes = endpoints.validate(obj)
    assert texts(causes)[:5] == [
        "subsets[0].ports[0].name: Required value",
        "subsets[0].ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive",
        f'subsets[0].ports[1].name: Invalid value: "Web": {LABEL_MSG}',
        "subsets[0].ports[1].port: Invalid value: 70000: must be between 1 and 65535, inclusive",
        'subsets[0].ports[1].protocol: Unsupported value: "HTTP": supported values: "SCTP", "TCP", "UDP"']
    assert fields(causes)[5:] == ["subsets[0].ports[2].appProtocol"]
    single = eps({"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 80, "protocol": "TCP"}]})
    assert endpoints.validate(single) == []                   # one port may be unnamed
    missing = eps({"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 80}]})
    assert texts(endpoints.validate(missing)) == ["subsets[0].ports[0].protocol: Required value"]


def test_endpoints_repack():
    obj = eps({"addresses": [{"ip": "10.0.0.2"}, {"ip": "10.0.0.1"}], "ports": [{"name": "a", "port": 80, "protocol": "TCP"}]},
              {"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}], "ports": [{"name": "b", "port": 81, "protocol": "TCP"}]},
              {"addresses": [{"ip": "10.0.0.1"}], "notReadyAddresses": [{"ip": "10.0.0.1"}],
               "ports": [{"name": "c", "port": 82, "protocol": "TCP"}]})
    endpoints.canonicalize(obj)
    assert obj["subsets"] == [
        {"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}],
         "ports": [{"name": "a", "port": 80, "protocol": "TCP"}, {"name": "b", "port": 81, "protocol": "TCP"}]},
        {"notReadyAddresses": [{"ip": "10.0.0.1"}], "ports": [{"name": "c", "port": 82, "protocol": "TCP"}]}]


def test_endpoints_columns():
    obj = eps({"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}], "notReadyAddresses": [{"ip": "10.0.0.3"}],
               "ports": [{"name": "a", "port": 80, "protocol": "TCP"}, {"name": "b", "port": 443, "protocol": "TCP"}]})
    assert endpoints.typed_columns(obj) == {"ready_addresses": 2, "not_ready_addresses": 1, "ports": 2}
    assert endpoints.format_endpoints(obj) == "10.0.0.1:80,10.0.0.2:80,10.0.0.1:443 + 1 more..."
    assert endpoints.format_endpoints(eps()) == "<none>"
    assert endpoints.format_endpoints(eps({"addresses": [{"ip": "2001:db8::1"}], "ports": [{"port": 8080}]})) \
        == "[2001:db8::1]:8080"
    assert endpoints.format_endpoints(eps({"addresses": [{"ip": "10.0.0.1"}]})) == "10.0.0.1"
    assert endpoints.format_endpoints(eps({"notReadyAddresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 1}]})) == ""
    assert [c.name for c in endpoints.columns] == ["Endpoints"]
    assert endpoints.columns[0].cell(eps(), NOW) == "<none>"


# =======================================================================================
# Job
# =======================================================================================

def job(name="pi", **spec):
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "default"},
            "spec": {"template": {"spec": {"restartPolicy": "Never",
                                           "containers": [{"name": "main", "image": "busybox:1.36",
                                                           "command": ["true"]}]}},
                     **spec}}


def created(obj):
    """What the store does on create: defaults, uid, then prepare_for_create."""
    jobs.default(obj)
    obj["metadata"]["uid"] = UID
    jobs.prepare_for_create(obj)
    return obj


def full_job():
    """Indexed, per-index backoff, a pod failure policy, a container with env/ports/resources."""
    return job(
        "full", completions=5, parallelism=2, completionMode="Indexed", backoffLimitPerIndex=1,
        maxFailedIndexes=2, activeDeadlineSeconds=600, ttlSecondsAfterFinished=0,
        podFailurePolicy={"rules": [
            {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42, 43]}},
            {"action": "FailIndex", "onExitCodes": {"operator": "NotIn", "values": [0, 1]}},
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
            {"action": "Count", "onPodConditions": [{"type": "example.com/Oom", "status": "False"}]}]},
        successPolicy={"rules": [{"succeededIndexes": "0-2,4", "succeededCount": 3}]},
        template={"metadata": {"labels": {"app": "full"}, "annotations": {"example.com/a": "b"}},
                  "spec": {"restartPolicy": "Never", "serviceAccountName": "runner",
                           "nodeSelector": {"kubernetes.io/os": "linux"},
                           "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
                           "volumes": [{"name": "scratch"}, {"name": "conf", "configMap": {"name": "cfg"}}],
                           "initContainers": [{"name": "init", "image": "busybox", "command": ["true"]}],
                           "containers": [{
                               "name": "main", "image": "registry.example.com/team/app:2.1",
                               "env": [{"name": "MODE", "value": "batch"},
                                       {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                                       {"name": "KEY", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
                               "envFrom": [{"configMapRef": {"name": "cfg"}, "prefix": "CFG_"}],
                               "ports": [{"name": "metrics", "containerPort": 9090}],
                               "resources": {"requests": {"cpu": "0.5", "memory": "256Mi"},
                                             "limits": {"cpu": 1, "memory": "1024Mi", "example.com/gpu": 1}},
                               "volumeMounts": [{"name": "scratch", "mountPath": "/tmp"},
                                                {"name": "conf", "mountPath": "/etc/app"}],
                               "readinessProbe": {"httpGet": {"port": "metrics"}},
                               "livenessProbe": {"exec": {"command": ["true"]}}}]}})


def test_job_defaults():
    obj = job()
    jobs.default(obj)
    spec = obj["spec"]
    assert (spec["completions"], spec["parallelism"], spec["backoffLimit"]) == (1, 1, 6)
    assert spec["completionMode"] == "NonIndexed" and spec["suspend"] is False
    assert spec["podReplacementPolicy"] == "TerminatingOrFailed" and "manualSelector" not in spec
    pod = spec["template"]["spec"]
    assert (pod["dnsPolicy"], pod["schedulerName"], pod["securityContext"], pod["terminationGracePeriodSeconds"]) \
        == ("ClusterFirst", "default-scheduler", {}, 30)
    container = pod["containers"][0]
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert (container["terminationMessagePath"], container["terminationMessagePolicy"]) == ("/dev/termination-log", "File")
    assert container["resources"] == {}
    before = copy.deepcopy(obj)
    jobs.default(obj)
    assert obj == before                                          # idempotent (runs on every update)


def test_job_default_variants():
    obj = job(completions=4)
    jobs.default(obj)
    assert (obj["spec"]["completions"], obj["spec"]["parallelism"]) == (4, 1)
    obj = job(parallelism=3)
    jobs.default(obj)
    assert "completions" not in obj["spec"] and obj["spec"]["parallelism"] == 3
    obj = job(backoffLimitPerIndex=1, completionMode="Indexed", completions=2)
    jobs.default(obj)
    assert obj["spec"]["backoffLimit"] == 2 ** 31 - 1
    obj = full_job()
    jobs.default(obj)
    spec = obj["spec"]
    assert spec["podReplacementPolicy"] == "Failed"
    assert spec["podFailurePolicy"]["rules"][2]["onPodConditions"][0]["status"] == "True"
    pod = spec["template"]["spec"]
    assert pod["volumes"][0]["emptyDir"] == {} and pod["volumes"][1]["configMap"]["defaultMode"] == 420
    assert pod["serviceAccount"] == "runner"
    main = pod["containers"][1 - 1]
    assert pod["initContainers"][0]["imagePullPolicy"] == "Always"          # no tag: latest
    assert main["ports"][0]["protocol"] == "TCP"
    assert main["env"][1]["valueFrom"]["fieldRef"]["apiVersion"] == "v1"
    assert main["readinessProbe"] == {"httpGet": {"port": "metrics", "path": "/", "scheme": "HTTP"},
                                      "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1,
                                      "failureThreshold": 3}
    assert main["resources"] == {"requests": {"cpu": "500m", "memory": "256Mi"},
                                 "limits": {"cpu": "1", "memory": "1Gi", "example.com/gpu": "1"}}


def test_job_bad_quantity_is_400():
    obj = job()
    obj["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1K"}}
    with pytest.raises(ApiError) as exc:
        jobs.default(obj)
    assert exc.value.code == 400
    assert exc.value.message == ('Job in version "v1" cannot be handled as a Job: '
                                 "unable to parse quantity's suffix")


def test_job_prepare_for_create():
    obj = created(job())
    spec = obj["spec"]
    assert spec["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": UID}}
    labels = {"batch.kubernetes.io/controller-uid": UID, "batch.kubernetes.io/job-name": "pi",
              "controller-uid": UID, "job-name": "pi"}
    assert spec["template"]["metadata"]["labels"] == labels
    assert obj["metadata"]["labels"] == labels                 # a Job without labels shows its template's
    assert obj["status"] == {}
    assert jobs.validate(obj) == []
    own = created(job(**{}))
    own["metadata"]["labels"] = {"team": "a"}
    assert created(dict(job(), metadata={"name": "pi", "namespace": "d", "labels": {"team": "a"}}))["metadata"][
        "labels"] == {"team": "a"}
    manual = job(manualSelector=True, selector={"matchLabels": {"app": "x"}})
    manual["spec"]["template"]["metadata"] = {"labels": {"app": "x"}}
    manual = created(manual)
    assert manual["spec"]["selector"] == {"matchLabels": {"app": "x"}}
    assert jobs.validate(manual) == []


def test_full_featured_job_is_valid():
    obj = created(full_job())
    assert jobs.validate(obj) == []
    assert jobs.validate_update(copy.deepcopy(obj), obj) == []


def test_job_template_required_parts():
    obj = created(job(template={}))
    assert texts(jobs.validate(obj)) == [
        "spec.template.spec.containers: Required value",
        'spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"']
    obj = created(job())
    obj["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    assert texts(jobs.validate(obj)) == [
        'spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"']
    obj["spec"]["template"]["spec"]["restartPolicy"] = "Sometimes"
    assert texts(jobs.validate(obj)) == [
        'spec.template.spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", '
        '"OnFailure", "Never"',
        'spec.template.spec.restartPolicy: Unsupported value: "Sometimes": supported values: "OnFailure", "Never"']


def test_job_containers():
    obj = job()
    obj["spec"]["template"]["spec"]["containers"] = [
        {"image": "busybox"}, {"name": "Bad_Name", "image": "x"}, {"name": "dup", "image": "x"},
        {"name": "dup"}]
    causes = jobs.validate(created(obj))
    assert texts(causes) == [
        "spec.template.spec.containers[0].name: Required value",
        f'spec.template.spec.containers[1].name: Invalid value: "Bad_Name": {LABEL_MSG}',
        "spec.template.spec.containers[3].image: Required value",
        'spec.template.spec.containers[3].name: Duplicate value: "dup"']


def test_job_container_details():
    obj = job()
    obj["spec"]["template"]["spec"]["containers"][0].update(
        ports=[{"name": "web", "containerPort": 0}, {"name": "web", "containerPort": 80, "protocol": "ICMP"}],
        env=[{"name": ""}, {"name": "A=B"}, {"name": "X", "value": "v", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
             {"name": "Y", "valueFrom": {"fieldRef": {"fieldPath": "status.phase"}}}, {"name": "Z", "valueFrom": {}}],
        resources={"requests": {"cpu": "2", "memory": "-1", "example.com/gpu": "1"},
                   "limits": {"cpu": "1", "foo": "1"}},
        volumeMounts=[{"name": "missing", "mountPath": "/a"}])
    causes = jobs.validate(created(obj))
    got = texts(causes)
    p = "spec.template.spec.containers[0]"
    assert f"{p}.ports[0].containerPort: Required value" in got
    assert f'{p}.ports[1].name: Duplicate value: "web"' in got
    assert f'{p}.ports[1].protocol: Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP"' in got
    assert f"{p}.env[0].name: Required value" in got
    assert (f'{p}.env[1].name: Invalid value: "A=B": a valid environment variable name must consist only of '
            "printable ASCII characters other than '='") in got
    assert f'{p}.env[2].valueFrom: Invalid value: "": may not be specified when `value` is not empty' in got
    assert any(t.startswith(f'{p}.env[3].valueFrom.fieldRef.fieldPath: Unsupported value: "status.phase"') for t in got)
    assert (f'{p}.env[4].valueFrom: Invalid value: "": must specify one of: `fieldRef`, `resourceFieldRef`, '
            "`configMapKeyRef` or `secretKeyRef`") in got
    assert f'{p}.resources.limits[foo]: Invalid value: "foo": must be a standard resource type or fully qualified' in got
    assert f'{p}.resources.limits[foo]: Invalid value: "foo": must be a standard resource for containers' in got
    assert f'{p}.resources.requests[memory]: Invalid value: "-1": must be greater than or equal to 0' in got
    assert f'{p}.resources.requests: Invalid value: "2": must be less than or equal to cpu limit of 1' in got
    assert f"{p}.resources.limits: Required value: Limit must be set for non overcommitable resources" in got
    assert f'{p}.volumeMounts[0].name: Not found: "missing"' in got
    assert "FieldValueNotFound" in reasons(causes)


def test_job_numbers():
    obj = created(job(parallelism=-1, completions=-1, backoffLimit=-1, activeDeadlineSeconds=-1,
                      ttlSecondsAfterFinished=-1))
    assert texts(jobs.validate(obj)) == [
        "spec.parallelism: Invalid value: -1: must be greater than or equal to 0",
        "spec.completions: Invalid value: -1: must be greater than or equal to 0",
        "spec.activeDeadlineSeconds: Invalid value: -1: must be greater than or equal to 0",
        "spec.backoffLimit: Invalid value: -1: must be greater than or equal to 0",
        "spec.ttlSecondsAfterFinished: Invalid value: -1: must be greater than or equal to 0"]


def test_job_indexed_rules():
    obj = created(job(completionMode="Indexed", parallelism=100_001))
    assert texts(jobs.validate(obj)) == [
        "spec.completions: Required value: when completion mode is Indexed",
        "spec.parallelism: Invalid value: 100001: must be less than or equal to 100000 when completion mode is Indexed"]
    obj = created(job(completionMode="Sideways"))
    assert texts(jobs.validate(obj)) == [
        'spec.completionMode: Unsupported value: "Sideways": supported values: "NonIndexed", "Indexed"']
    obj = created(job(backoffLimitPerIndex=1, maxFailedIndexes=1))
    assert texts(jobs.validate(obj)) == [
        "spec.backoffLimitPerIndex: Invalid value: 1: requires indexed completion mode",
        "spec.maxFailedIndexes: Invalid value: 1: requires indexed completion mode"]
    obj = created(job(completionMode="Indexed", completions=2, maxFailedIndexes=3))
    assert texts(jobs.validate(obj)) == [
        "spec.backoffLimitPerIndex: Required value: when maxFailedIndexes is specified",
        "spec.maxFailedIndexes: Invalid value: 3: must be less than or equal to completions"]
    long_name = created(job("a" * 62, completionMode="Indexed", completions=10))
    assert texts(jobs.validate(long_name)) == [
        f'metadata.name: Invalid value: "{"a" * 62}": will not able to create pod with invalid DNS label: '
        f'{"a" * 62}-9']


def test_job_pod_failure_policy_rules():
    base = {"rules": [
        {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [3, 0, 3]}},
        {"action": "", "onExitCodes": {"operator": "Maybe", "values": [], "containerName": "nope"}},
        {"action": "Panic", "onExitCodes": {"operator": "In", "values": [1]}, "onPodConditions": [{"type": "X"}]},
        {"action": "Ignore"},
        {"action": "Count", "onPodConditions": [{"type": "bad/type/x", "status": "Maybe"}]}]}
    obj = created(job(podFailurePolicy=base))
    obj["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"
    p = "spec.podFailurePolicy.rules"
    got = texts(jobs.validate(obj))
    assert got[:12] == [
        f'{p}[0].action: Invalid value: "FailIndex": requires the backoffLimitPerIndex to be set',
        f"{p}[0].onExitCodes.values[1]: Invalid value: 0: must not be 0 for the In operator",
        f"{p}[0].onExitCodes.values[2]: Duplicate value: 3",
        f"{p}[0].onExitCodes.values: Invalid value: [3,0,3]: must be ordered",
        f'{p}[1].action: Required value: valid values: ["Count" "FailIndex" "FailJob" "Ignore"]',
        f'{p}[1].onExitCodes.operator: Unsupported value: "Maybe": supported values: "In", "NotIn"',
        f'{p}[1].onExitCodes.containerName: Invalid value: "nope": must be one of the container or initContainer '
        "names in the pod template",
        f"{p}[1].onExitCodes.values: Invalid value: []: at least one value is required",
        f'{p}[2].action: Unsupported value: "Panic": supported values: "Count", "FailIndex", "FailJob", "Ignore"',
        f"{p}[2]: Invalid value: specifying both OnExitCodes and OnPodConditions is not supported",
        f"{p}[3]: Invalid value: specifying one of OnExitCodes and OnPodConditions is required",
        f'{p}[4].onPodConditions[0].type: Invalid value: "bad/type/x": a qualified name must consist of '
        "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
        "'MyName' or 'my.name' or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?"
        "[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    assert got[12:] == [
        f'{p}[4].onPodConditions[0].status: Unsupported value: "Maybe": supported values: "False", "True", "Unknown"',
        'spec.template.spec.restartPolicy: Invalid value: "OnFailure": only "Never" is supported when '
        "podFailurePolicy is specified"]
    many = created(job(podFailurePolicy={"rules": [{"action": "Ignore", "onExitCodes": {"operator": "NotIn",
                                                                                          "values": list(range(256))}}] * 21}))
    got = texts(jobs.validate(many))
    assert got[0] == "spec.podFailurePolicy.rules: Too many: 21: must have at most 20 items"
    assert got[1] == "spec.podFailurePolicy.rules[0].onExitCodes.values: Too many: 256: must have at most 255 items"


def test_job_pod_replacement_and_success_policy():
    obj = created(job(podFailurePolicy={"rules": [{"action": "Ignore", "onPodConditions": [{"type": "A"}]}]},
                      podReplacementPolicy="TerminatingOrFailed"))
    assert texts(jobs.validate(obj)) == [
        'spec.podReplacementPolicy: Unsupported value: "TerminatingOrFailed": supported values: "Failed"']
    obj = created(job(podReplacementPolicy="Whenever"))
    assert texts(jobs.validate(obj)) == [
        'spec.podReplacementPolicy: Unsupported value: "Whenever": supported values: "Failed", "TerminatingOrFailed"']
    obj = created(job(successPolicy={"rules": [{"succeededCount": 1}]}))
    assert fields(jobs.validate(obj)) == ["spec.successPolicy"]
    obj = created(job(completionMode="Indexed", completions=3, successPolicy={"rules": [
        {}, {"succeededIndexes": "2-1"}, {"succeededIndexes": "0,1", "succeededCount": 3}]}))
    assert texts(jobs.validate(obj)) == [
        "spec.successPolicy.rules[0]: Required value: at least one of succeededCount or succeededIndexes must be specified",
        'spec.successPolicy.rules[1].succeededIndexes: Invalid value: "2-1": error parsing succeededIndexes: '
        "non-increasing order, previous: 2, current: 1",
        "spec.successPolicy.rules[2].succeededCount: Invalid value: 3: must be less than or equal to 2 "
        "(the number of indexes in the specified succeededIndexes field)"]


def test_job_selector_rules():
    obj = created(job())
    obj["spec"]["template"]["metadata"]["labels"]["controller-uid"] = "someone-else"
    assert texts(jobs.validate(obj))[0].startswith(
        "spec.template.metadata.labels[controller-uid]: Invalid value: ")
    assert texts(jobs.validate(obj))[0].endswith(f": must be '{UID}'")
    manual = created(job(manualSelector=True, selector={"matchLabels": {"app": "x"}}))
    assert texts(jobs.validate(manual)) == [
        "spec.template.metadata.labels: Invalid value: {}: `selector` does not match template `labels`"]
    no_selector = created(job(manualSelector=True))
    assert texts(jobs.validate(no_selector)) == ["spec.selector: Required value"]
    foreign = created(job(selector={"matchLabels": {"app": "x"}}))
    assert "spec.selector" in fields(jobs.validate(foreign))
    # Jobs from before 1.27 carry only the legacy labels and select on them: still valid
    # when the stored object had no prefixed labels (validate_update's case).
    legacy = created(job(selector={"matchLabels": {"controller-uid": UID}}))
    for key in ("batch.kubernetes.io/controller-uid", "batch.kubernetes.io/job-name"):
        del legacy["spec"]["template"]["metadata"]["labels"][key]
    legacy["spec"]["selector"] = {"matchLabels": {"controller-uid": UID}}
    assert jobs.validate(legacy, require_prefixed_labels=False) == []
    assert fields(jobs.validate(legacy)) == ["spec.template.metadata.labels[batch.kubernetes.io/controller-uid]",
                                             "spec.template.metadata.labels[batch.kubernetes.io/job-name]"]


def test_job_template_metadata_and_pod_spec():
    obj = job()
    obj["spec"]["template"]["metadata"] = {"labels": {"bad key": "v"}}
    pod = obj["spec"]["template"]["spec"]
    pod.update(dnsPolicy="Sometimes", nodeSelector={"k": "bad value!"}, activeDeadlineSeconds=0,
               tolerations=[{"operator": "Equal", "value": "x"}, {"key": "k", "operator": "Near", "effect": "Now"}],
               volumes=[{"name": "v", "secret": {}, "configMap": {"name": "c"}}, {"name": "Bad_Vol"}],
               ephemeralContainers=[{"name": "debug", "image": "busybox"}])
    got = texts(jobs.validate(created(obj)))
    assert any(t.startswith('spec.template.labels: Invalid value: "bad key"') for t in got)
    assert "spec.template.spec.volumes[0].configMap: Forbidden: may not specify more than 1 volume type" in got
    assert "spec.template.spec.volumes[0].secret.secretName: Required value" in got
    assert any(t.startswith('spec.template.spec.volumes[1].name: Invalid value: "Bad_Vol"') for t in got)
    assert ('spec.template.spec.dnsPolicy: Unsupported value: "Sometimes": supported values: '
            '"ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"') in got
    assert any(t.startswith('spec.template.spec.nodeSelector: Invalid value: "bad value!"') for t in got)
    assert ("spec.template.spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647, "
            "inclusive") in got
    assert ('spec.template.spec.tolerations[0].operator: Invalid value: "Equal": operator must be Exists when '
            '`key` is empty, which means "match all values and all keys"') in got
    assert ('spec.template.spec.tolerations[1].operator: Unsupported value: "Near": supported values: "Equal", '
            '"Exists"') in got
    assert ('spec.template.spec.tolerations[1].effect: Unsupported value: "Now": supported values: '
            '"NoSchedule", "PreferNoSchedule", "NoExecute"') in got
    assert "spec.template.spec.ephemeralContainers: Forbidden: ephemeral containers not allowed in pod template" in got


def test_job_init_containers():
    obj = job()
    pod = obj["spec"]["template"]["spec"]
    pod["initContainers"] = [
        {"name": "main", "image": "x"},                                              # clashes with a container
        {"name": "probe", "image": "x", "readinessProbe": {"exec": {"command": ["true"]}}},
        {"name": "sidecar", "image": "x", "restartPolicy": "Always", "readinessProbe": {"exec": {"command": ["a"]}}},
        {"name": "odd", "image": "x", "restartPolicy": "Never"}]
    assert texts(jobs.validate(created(obj))) == [
        'spec.template.spec.initContainers[0].name: Duplicate value: "main"',
        "spec.template.spec.initContainers[1].readinessProbe: Forbidden: may not be set for init containers "
        "without restartPolicy=Always",
        'spec.template.spec.initContainers[3].restartPolicy: Unsupported value: "Never": supported values: "Always"']


def test_job_update_immutability():
    old = created(job())
    new = copy.deepcopy(old)
    new["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox:1.37"
    new["spec"]["completions"] = 2
    new["spec"]["completionMode"] = "Indexed"
    new["spec"]["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": UID, "x": "y"}}
    got = jobs.validate_update(new, old)
    assert fields(got) == ["spec.completions", "spec.selector", "spec.template", "spec.completionMode"]
    assert got[0].text == "spec.completions: Invalid value: 2: can only be modified in tandem with spec.parallelism"
    assert got[3].text == 'spec.completionMode: Invalid value: "Indexed": field is immutable'
    for key, value in (("podFailurePolicy", {"rules": []}), ("backoffLimitPerIndex", 2),
                       ("managedBy", "example.com/ctl"), ("successPolicy", {"rules": [{"succeededCount": 1}]})):
        changed = copy.deepcopy(old)
        changed["spec"][key] = value
        assert fields(jobs.validate_update(changed, old)) == [f"spec.{key}"], key
    # Mutable: parallelism, suspend, backoffLimit, activeDeadlineSeconds, ttl, labels of the Job itself.
    fine = copy.deepcopy(old)
    fine["spec"].update(parallelism=5, suspend=True, backoffLimit=1, activeDeadlineSeconds=9, ttlSecondsAfterFinished=1)
    assert jobs.validate_update(fine, old) == []


def test_job_elastic_indexed_completions():
    old = created(job(completionMode="Indexed", completions=3, parallelism=3))
    new = copy.deepcopy(old)
    new["spec"].update(completions=5, parallelism=5)
    assert jobs.validate_update(new, old) == []
    new["spec"]["parallelism"] = 4
    assert fields(jobs.validate_update(new, old)) == ["spec.completions"]


def test_job_suspended_scheduling_directives():
    old = created(job(suspend=True))
    new = copy.deepcopy(old)
    pod = new["spec"]["template"]["spec"]
    pod["nodeSelector"] = {"zone": "a"}
    pod["tolerations"] = [{"key": "k", "operator": "Exists"}]
    pod["schedulingGates"] = [{"name": "example.com/wait"}]
    pod["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "z", "operator": "In", "values": ["a"]}]}]}}}
    new["spec"]["template"]["metadata"]["annotations"] = {"example.com/x": "y"}
    assert jobs.validate_update(new, old) == []
    pod["affinity"]["podAffinity"] = {}
    pod["affinity"]["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname"}]}
    assert fields(jobs.validate_update(new, old)) == ["spec.template"]
    started = copy.deepcopy(old)
    started["status"] = {"startTime": "2026-11-22T00:00:00Z"}
    newer = copy.deepcopy(old)
    newer["spec"]["template"]["spec"]["nodeSelector"] = {"zone": "a"}
    assert fields(jobs.validate_update(newer, started)) == ["spec.template"]
    running = created(job())
    moved = copy.deepcopy(running)
    moved["spec"]["template"]["spec"]["nodeSelector"] = {"zone": "a"}
    assert fields(jobs.validate_update(moved, running)) == ["spec.template"]


def status_pair(spec=None, old_status=None, **status):
    old = created(job(**(spec or {})))
    old["status"] = old_status or {}
    new = copy.deepcopy(old)
    new["status"] = status
    return new, old


def condition(kind, status="True"):
    return {"type": kind, "status": status, "lastProbeTime": "2026-11-22T00:00:00Z",
            "lastTransitionTime": "2026-11-22T00:00:00Z"}


def test_job_status_valid_progression():
    start = "2026-11-22T00:00:00Z"
    new, old = status_pair(active=1, ready=1, startTime=start)
    assert jobs.validate_status_update(new, old) == []
    done = {"succeeded": 1, "startTime": start, "completionTime": "2026-11-22T00:01:00Z",
            "conditions": [condition("SuccessCriteriaMet"), condition("Complete")]}
    new, old = status_pair(old_status={"active": 1, "startTime": start}, **done)
    assert jobs.validate_status_update(new, old) == []
    indexed = {"completionMode": "Indexed", "completions": 6, "parallelism": 2, "backoffLimitPerIndex": 1}
    new, old = status_pair(indexed, completedIndexes="0,2-4", failedIndexes="1", failed=1)
    assert jobs.validate_status_update(new, old) == []


def test_job_status_rules():
    new, old = status_pair(active=-1, succeeded=-2, ready=3)
    assert texts(jobs.validate_status_update(new, old)) == [
        "status.active: Invalid value: -1: must be greater than or equal to 0",
        "status.succeeded: Invalid value: -2: must be greater than or equal to 0",
        "status.ready: Invalid value: 3: cannot set more ready pods than active",
        "status.succeeded: Invalid value: -2: cannot decrease the succeeded counter"]
    new, old = status_pair(old_status={"failed": 2, "succeeded": 1}, failed=1)
    assert texts(jobs.validate_status_update(new, old)) == [
        "status.failed: Invalid value: 1: cannot decrease the failed counter",
        "status.succeeded: Invalid value: 0: cannot decrease the succeeded counter"]
    new, old = status_pair(conditions=[condition("Complete")], active=1)
    assert texts(jobs.validate_status_update(new, old)) == [
        "status.completionTime: Required value: completionTime is required for Complete jobs",
        "status.conditions: Invalid value: cannot set Complete=True condition without the SuccessCriteriaMet=true "
        "condition",
        "status.active: Invalid value: 1: active>0 is invalid for finished job",
        "status.startTime: Required value: startTime is required for finished job"]
    new, old = status_pair(conditions=[condition("Failed")], startTime="2026-11-22T00:00:00Z")
    assert texts(jobs.validate_status_update(new, old)) == [
        "status.conditions: Invalid value: cannot set Failed=True condition without the FailureTarget=true condition"]
    terminal = {"conditions": [condition("FailureTarget"), condition("Failed")], "startTime": "2026-11-22T00:00:00Z"}
    new, old = status_pair(old_status=terminal, startTime="2026-11-22T00:00:00Z")
    assert texts(jobs.validate_status_update(new, old)) == [
        "status.conditions: Invalid value: cannot disable the terminal Failed=True condition",
        "status.conditions: Invalid value: cannot disable the terminal FailureTarget=True condition"]
    new, old = status_pair(startTime="2026-11-22T00:01:00Z", completionTime="2026-11-22T00:00:00Z")
    assert texts(jobs.validate_status_update(new, old)) == [
        'status.completionTime: Invalid value: "2026-11-22T00:00:00Z": cannot set completionTime when there is '
        "no Complete=True condition",
        'status.completionTime: Invalid value: "2026-11-22T00:00:00Z": completionTime cannot be set before startTime']


def test_job_status_indexes():
    indexed = {"completionMode": "Indexed", "completions": 5, "parallelism": 5, "backoffLimitPerIndex": 1}
    new, old = status_pair(indexed, completedIndexes="1,x", failedIndexes="3-2")
    assert texts(jobs.validate_status_update(new, old)) == [
        'status.completedIndexes: Invalid value: "1,x": error parsing completedIndexes: cannot convert string '
        'to integer for index: "x"',
        'status.failedIndexes: Invalid value: "3-2": error parsing failedIndexes: non-increasing order, '
        "previous: 3, current: 2"]
    new, old = status_pair(indexed, completedIndexes="0-2,7", failedIndexes="2")
    assert texts(jobs.validate_status_update(new, old)) == [
        'status.completedIndexes: Invalid value: "0-2,7": error parsing completedIndexes: too large index: "7"',
        'status.failedIndexes: Invalid value: "2": failedIndexes and completedIndexes overlap at index: 2']
    new, old = status_pair(completedIndexes="0", failedIndexes="0")
    assert texts(jobs.validate_status_update(new, old)) == [
        'status.completedIndexes: Invalid value: "0": cannot set non-empty completedIndexes when non-indexed '
        "completion mode",
        'status.failedIndexes: Invalid value: "0": cannot set non-null failedIndexes when backoffLimitPerIndex is null',
        'status.failedIndexes: Invalid value: "0": failedIndexes and completedIndexes overlap at index: 0']
    assert jobs.parse_index_intervals("1,3-5", 6) == [(1, 1), (3, 5)]
    assert jobs.count_indexes("0-2,4", 5) == 4
    with pytest.raises(ValueError, match="at most two parts"):
        jobs.parse_index_intervals("1-2-3", 5)
    with pytest.raises(ValueError, match="non-increasing order, previous: 3, current: 3"):
        jobs.parse_index_intervals("1-3,3", 5)


def test_job_status_only_checks_changed_fields():
    # An old status that already breaks a rule may still be updated in unrelated ways.
    bad = {"conditions": [condition("Complete")], "active": 1}
    new, old = status_pair(old_status=bad, conditions=[condition("Complete")], active=1, ready=0)
    assert jobs.validate_status_update(new, old) == []


# Columns and selectors --------------------------------------------------------------------

def test_job_field_getter_and_typed_columns():
    obj = created(job(completions=3, parallelism=2))
    assert jobs.field_getters["status.successful"](obj) == "0"
    obj["status"] = {"succeeded": 2, "active": 1, "ready": 1, "failed": 0,
                     "startTime": "2026-11-22T11:00:00Z"}
    assert jobs.field_getters["status.successful"](obj) == "2"
    assert jobs.typed_columns(obj) == {
        "completions": 3, "parallelism": 2, "succeeded": 2, "failed": 0, "active": 1, "ready": 1,
        "suspend": False, "completion_mode": "NonIndexed",
        "start_time": datetime(2026, 11, 22, 11, tzinfo=timezone.utc), "completion_time": None, "phase": "Running"}


@pytest.mark.parametrize("conditions,deleting,expected", [
    ([], False, "Running"),
    ([condition("Complete")], True, "Complete"),
    ([condition("Failed")], False, "Failed"),
    ([condition("Suspended")], True, "Terminating"),
    ([condition("Suspended")], False, "Suspended"),
    ([condition("Suspended", "False"), condition("FailureTarget")], False, "FailureTarget"),
    ([condition("SuccessCriteriaMet")], False, "SuccessCriteriaMet"),
    ([condition("Complete", "False"), condition("Complete")], False, "Running"),   # first of a type decides
])
def test_job_phase(conditions, deleting, expected):
    obj = created(job())
    obj["status"] = {"conditions": conditions}
    if deleting:
        obj["metadata"]["deletionTimestamp"] = "2026-11-22T00:00:00Z"
    assert jobs.phase(obj) == expected


def test_job_table_cells():
    names = [c.name for c in jobs.columns]
    assert names == ["Status", "Completions", "Duration", "Containers", "Images", "Selector"]
    assert [c.priority for c in jobs.columns] == [0, 0, 0, 1, 1, 1]
    cell = {c.name: c.cell for c in jobs.columns}
    obj = created(full_job())
    obj["status"] = {"succeeded": 2, "startTime": "2026-11-22T11:58:30Z"}
    assert cell["Completions"](obj, NOW) == "2/5"
    assert cell["Duration"](obj, NOW) == "90s"
    obj["status"]["completionTime"] = "2026-11-22T12:30:30Z"
    assert cell["Duration"](obj, NOW) == "32m"
    assert cell["Containers"](obj, NOW) == "main"
    assert cell["Images"](obj, NOW) == "registry.example.com/team/app:2.1"
    assert cell["Selector"](obj, NOW) == f"batch.kubernetes.io/controller-uid={UID}"
    parallel = created(job(parallelism=3))
    assert cell["Completions"](parallel, NOW) == "0/1 of 3"
    assert cell["Duration"](parallel, NOW) == ""
    assert cell["Status"](parallel, NOW) == "Running"
    two = job()
    two["spec"]["template"]["spec"]["containers"].append({"name": "side", "image": "nginx"})
    assert cell["Containers"](two, NOW) == "main,side" and cell["Images"](two, NOW) == "busybox:1.36,nginx"


@pytest.mark.parametrize("seconds,text", [
    (-5, "<invalid>"), (-1, "0s"), (0, "0s"), (119, "119s"), (120, "2m"), (150, "2m30s"), (600, "10m"),
    (3 * 3600 - 1, "179m"), (3 * 3600, "3h"), (3 * 3600 + 60 * 5, "3h5m"), (8 * 3600, "8h"), (47 * 3600, "47h"),
    (48 * 3600, "2d"), (50 * 3600, "2d2h"), (8 * 86400, "8d"), (800 * 86400, "2y70d"), (9 * 365 * 86400, "9y"),
])
def test_human_duration(seconds, text):
    assert formats.human_duration(seconds) == text


def test_image_pull_policy_defaults():
    for image, policy in (("busybox", "Always"), ("busybox:latest", "Always"), ("busybox:1.36", "IfNotPresent"),
                          ("localhost:5000/app", "Always"), ("app@sha256:" + "a" * 64, "IfNotPresent"),
                          ("Bad/Name", "IfNotPresent")):
        obj = job()
        obj["spec"]["template"]["spec"]["containers"][0]["image"] = image
        jobs.default(obj)
        assert obj["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] == policy, image
    obj = job()
    obj["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = "Never"
    jobs.default(obj)
    assert obj["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] == "Never"


def test_job_time_normalization():
    obj = created(job())
    obj["status"] = {"startTime": "2026-11-22T13:00:00.75+01:00",
                     "conditions": [{"type": "Complete", "status": "True",
                                     "lastTransitionTime": "2026-11-22T12:00:01Z"}]}
    jobs.normalize(obj)
    assert obj["status"]["startTime"] == "2026-11-22T12:00:00Z"
    obj["status"]["completionTime"] = "yesterday"
    with pytest.raises(ApiError) as exc:
        jobs.normalize(obj)
    assert exc.value.message.startswith('Job in version "v1" cannot be handled as a Job: parsing time "yesterday"')
    assert NOW - timedelta(0) == NOW


# Semantic comparison -------------------------------------------------------------------------

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


@given(st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30),
                    timezones=st.sampled_from([timezone.utc, timezone(timedelta(hours=5, minutes=30)),
                                               timezone(timedelta(hours=-8))])))
def test_micro_time_round_trip(moment):
    text = moment.isoformat(timespec="microseconds")               # +05:30 style offsets
    assert formats.parse_go_time(text, formats.MICRO_TIME_LAYOUT) == moment
    assert formats.normalize_micro_time(formats.normalize_micro_time(text)) == formats.normalize_micro_time(text)
