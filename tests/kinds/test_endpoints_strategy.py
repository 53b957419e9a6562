"""Endpoints (v1) strategy: defaults, validation, repacking, columns (core/strategy.py).

Plain functions on dicts: no database, no Django settings.
"""
from __future__ import annotations

from dashboard.core import strategy as endpoints
from rule_helpers import LABEL_MSG, NOW, SUBDOMAIN_MSG, UID, fields, texts


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
