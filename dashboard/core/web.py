"""Endpoints pages: the presenter (a card with the readiness matrix, the namespace roll-up),
the form, and the declaration that registers them with the pages (web.kinds, like an
admin.ModelAdmin)."""
from __future__ import annotations

import re
from datetime import datetime

from django import forms
from django.db.models import Count, Q, Sum

from dashboard.web import kinds
from dashboard.web.forms import (ObjectForm, format_address, format_port, line_list_field, numbered_lines,
                                 parse_address_line, parse_port_line, put)
from dashboard.web.present import base_item

from .actions import do_set_address_readiness
from .strategy import address_key, make_subset


# ---------------------------------------------------------------------------------------------
# Presenter: the readiness matrix


CELL_TEXT = {"ready": "ready", "not-ready": "not ready", "absent": "absent"}


def _port_key(port: dict | None) -> tuple:
    if port is None:
        return ("", None, "")
    return (port.get("name") or "", port.get("port"), port.get("protocol") or "TCP")


def present_endpoints(obj: dict, now: datetime) -> dict:
    ports: dict[tuple, dict] = {}
    addresses: dict[tuple[str, str], dict] = {}
    cells: dict[tuple, str] = {}          # (address key, port key) -> ready / not-ready
    for subset in obj.get("subsets") or []:
        subset_ports = subset.get("ports") or [None]     # None: a subset without ports
        for port in subset_ports:
            pkey = _port_key(port)
            if pkey not in ports:
                if port is None:
                    ports[pkey] = {"name": "", "port": "", "protocol": "", "text": "no ports"}
                else:
                    ports[pkey] = {"name": pkey[0], "port": pkey[1], "protocol": pkey[2],
                                   "text": f"{pkey[0] + ' ' if pkey[0] else ''}{pkey[1]}/{pkey[2]}"}
        for state, field in (("ready", "addresses"), ("not-ready", "notReadyAddresses")):
            for address in subset.get(field) or []:
                akey = address_key(address)
                addresses.setdefault(akey, address)
                for port in subset_ports:
                    key = (akey, _port_key(port))
                    # Not ready wins, as the strategy's repacking decides.
                    if cells.get(key) != "not-ready":
                        cells[key] = state
    port_keys = sorted(ports, key=lambda k: (k[1] is None, k[1] or 0, k[0], k[2]))
    for pkey in port_keys:
        ports[pkey].update(ready=0, total=0)
    rows = []
    totals = {"ready": 0, "not_ready": 0, "absent": 0}
    for akey in sorted(addresses, key=_ip_sort_key):
        address = addresses[akey]
        ref = address.get("targetRef") or {}
        row_cells = []
        for pkey in port_keys:
            state = cells.get((akey, pkey), "absent")
            totals[state.replace("-", "_")] += 1
            ports[pkey]["total"] += state != "absent"
            ports[pkey]["ready"] += state == "ready"
            row_cells.append({"state": state, "text": CELL_TEXT[state], "port": ports[pkey]["text"]})
        states = {c["state"] for c in row_cells if c["state"] != "absent"}
        overall = ("ready" if states == {"ready"} else "not-ready" if states == {"not-ready"} else "partial")
        rows.append({
            "ip": address.get("ip", ""),
            "hostname": address.get("hostname") or "",
            "node": address.get("nodeName") or "",
            "target": f"{ref.get('kind') or '?'}/{ref.get('name') or ref.get('uid') or '?'}" if ref else "",
            "target_namespace": ref.get("namespace") or "",
            "state": overall,
            "state_text": {"ready": "ready", "not-ready": "not ready", "partial": "partly ready"}[overall],
            "cells": row_cells,
        })
    ready = sum(r["state"] == "ready" for r in rows)
    partial = sum(r["state"] == "partial" for r in rows)
    not_ready = len(rows) - ready - partial
    if not rows:
        health, health_text = "empty", "no addresses"
    elif ready == len(rows):
        health, health_text = "ok", "all ready"
    elif ready == 0 and partial == 0:
        health, health_text = "bad", "none ready"
    else:
        health, health_text = "warn", f"{ready} of {len(rows)} ready"
    item = base_item("Endpoints", obj, now)
    item.update({
        "ports": [ports[k] for k in port_keys],
        "addresses": rows,
        "ready": ready,                 # ready on every port
        "not_ready": not_ready,         # ready on none
        "partial": partial,             # ready on some ports only
        "cells": totals,
        "health": health,
        "health_text": health_text,
    })
    return item


def _ip_sort_key(akey: tuple[str, str]) -> tuple:
    ip = akey[0]
    parts = ip.split(".")
    if len(parts) == 4 and all(p.isdigit() for p in parts):
        return (4, tuple(int(p) for p in parts), akey[1])
    return (6, (ip,), akey[1])


def endpoints_rollup(items: list[dict]) -> list[dict]:
    """Per namespace: objects, addresses ready / not ready, objects fully ready."""
    out: dict[str, dict] = {}
    for item in items:
        row = out.setdefault(item["namespace"], {"namespace": item["namespace"], "objects": 0, "ready": 0,
                                                 "not_ready": 0, "healthy": 0})
        row["objects"] += 1
        row["ready"] += item["ready"]
        row["not_ready"] += item["not_ready"] + item["partial"]
        row["healthy"] += item["health"] == "ok"
    return [out[k] for k in sorted(out)]


# ---------------------------------------------------------------------------------------------
# Form


MAX_SUBSETS = 50


def _port_text(key: tuple) -> str:
    name, port, protocol = key
    return f"{name + ' ' if name else ''}{port}/{protocol}"


class EndpointsForm(ObjectForm):
    """Subsets as three textareas each (ready addresses, not-ready addresses, ports), added
    and removed with submit buttons (no JavaScript). Fields the form does not show (an
    address's targetRef, a port's appProtocol) are kept for the addresses and ports that
    stay."""

    KIND = "Endpoints"
    ADD_SECTION = {"action": "add-subset", "label": "Add a subset",
                   "help": "Adding or removing a subset saves nothing yet."}
    ADDRESS_HELP = "One per line: IP, then optionally hostname (or -) and node name, e.g. 10.1.0.5 web-0 node-a"
    PORT_HELP = "One per line: [name] port (1 to 65535) [protocol], e.g. http 80 TCP (or http 80/TCP, as the matrix writes it)"

    subsets = forms.IntegerField(required=False, min_value=0, max_value=MAX_SUBSETS, widget=forms.HiddenInput)

    def __init__(self, data=None, *, initial=None, **kwargs):
        source = data if data is not None else (initial or {})
        try:
            count = int(source.get("subsets") or 0)
        except (TypeError, ValueError):
            count = 0
        self.subset_count = max(0, min(count, MAX_SUBSETS))
        super().__init__(data, initial=initial, **kwargs)
        for i in range(self.subset_count):
            n = i + 1
            self.fields[f"s{i}-ready"] = line_list_field(f"Ready addresses (subset {n})", self.ADDRESS_HELP)
            self.fields[f"s{i}-not_ready"] = line_list_field(f"Not-ready addresses (subset {n})", self.ADDRESS_HELP)
            self.fields[f"s{i}-ports"] = line_list_field(f"Ports (subset {n})", self.PORT_HELP, rows=2)
        self.size_textareas()
        self.subset_index: list[int] = []   # built subset -> form subset

    @classmethod
    def data_from_object(cls, obj):
        data = super().data_from_object(obj)
        subsets = obj.get("subsets") or []
        data["subsets"] = str(len(subsets))
        for i, subset in enumerate(subsets):
            data[f"s{i}-ready"] = "\n".join(format_address(a) for a in subset.get("addresses") or [])
            data[f"s{i}-not_ready"] = "\n".join(format_address(a) for a in subset.get("notReadyAddresses") or [])
            data[f"s{i}-ports"] = "\n".join(format_port(p) for p in subset.get("ports") or [])
        return data

    def clean(self):
        cleaned = super().clean()
        for name in list(self.fields):
            if not name.startswith("s") or "-" not in name or name not in cleaned:
                continue
            parse = parse_port_line if name.endswith("-ports") else parse_address_line
            items, lines, problems = [], [], []
            for n, line in numbered_lines(cleaned[name]):
                try:
                    items.append(parse(line))
                    lines.append(n)
                except ValueError as exc:
                    problems.append(f"Line {n}: {exc}.")
            if problems:
                self.add_error(name, problems)
            else:
                cleaned[name] = items
                self.line_maps[name] = lines
        self._check_both_ready_and_not(cleaned)
        return cleaned

    def _check_both_ready_and_not(self, cleaned: dict) -> None:
        """An address listed ready and not ready for the same port: kube's repacking
        (RepackSubsets: a port's address once not ready stays not ready) would keep it not
        ready without a word. Refused at the ready line naming it, so the person decides
        rather than the repacking: the form has no other place to tell them."""
        def parsed(i: int, part: str) -> list:
            value = cleaned.get(f"s{i}-{part}")
            return value if isinstance(value, list) else []

        def ports(i: int) -> set:
            return {_port_key(p) for p in parsed(i, "ports")} or {None}   # None: no ports

        for i in range(self.subset_count):
            problems = []
            for n, address in zip(self.line_maps.get(f"s{i}-ready", []), parsed(i, "ready")):
                for j in range(self.subset_count):
                    shared = ports(i) & ports(j)
                    if not shared or address["ip"] not in {a["ip"] for a in parsed(j, "not_ready")}:
                        continue
                    where = "" if j == i else f" of subset {j + 1}"
                    on = "" if j == i or shared == {None} else " for port " + ", ".join(
                        _port_text(k) for k in sorted(shared, key=str) if k is not None)
                    problems.append(f"Line {n}: {address['ip']} is also listed under Not-ready addresses{where}{on}. "
                                    "An address is either ready or not ready for a port (Kubernetes would keep "
                                    "it not ready): remove one of the two lines.")
                    break
            if problems:
                self.add_error(f"s{i}-ready", problems)

    def apply(self, obj):
        super().apply(obj)
        c = self.cleaned_data
        # What the form does not show is kept for the addresses / ports that stay.
        known_addresses, known_ports = {}, {}
        for subset in obj.get("subsets") or []:
            for a in (subset.get("addresses") or []) + (subset.get("notReadyAddresses") or []):
                known_addresses.setdefault(a.get("ip"), a)
            for p in subset.get("ports") or []:
                known_ports.setdefault((p.get("name") or "", p.get("port"), p.get("protocol") or "TCP"), p)

        def address(item: dict) -> dict:
            out = {k: v for k, v in (known_addresses.get(item["ip"]) or {}).items() if k not in ("hostname", "nodeName")}
            out.update(item)
            return out

        def port(item: dict) -> dict:
            key = (item.get("name") or "", item["port"], item.get("protocol") or "TCP")
            out = {k: v for k, v in (known_ports.get(key) or {}).items() if k not in ("name", "protocol")}
            out.update(item)
            return out

        subsets = []
        self.subset_index = []
        for i in range(self.subset_count):
            ready = [address(a) for a in c.get(f"s{i}-ready") or []]
            not_ready = [address(a) for a in c.get(f"s{i}-not_ready") or []]
            ports = [port(p) for p in c.get(f"s{i}-ports") or []]
            if not (ready or not_ready or ports):
                continue   # an empty subset in the form is just unused
            subsets.append(make_subset(ready, not_ready, ports))
            self.subset_index.append(i)
        put(obj, "subsets", subsets)
        return obj

    def locate(self, path):
        m = re.match(r"subsets\[(\d+)\](.*)$", path)
        if not m:
            return super().locate(path)
        built = int(m.group(1))
        i = self.subset_index[built] if built < len(self.subset_index) else built
        rest = m.group(2)
        for key, suffix in (("addresses", "ready"), ("notReadyAddresses", "not_ready"), ("ports", "ports")):
            sub = re.match(rf"\.{key}\[(\d+)\](?:\.(\w+))?", rest)
            if sub:
                field = f"s{i}-{suffix}"
                if field not in self.fields:
                    return None, ""
                return field, self.line_hint(field, int(sub.group(1)), sub.group(2))
        field = f"s{i}-ready"
        return (field, "") if field in self.fields else (None, "")

    def sections(self):
        out = super().sections()
        for i in range(self.subset_count):
            out.append({"legend": f"Subset {i + 1}", "subset": i,
                        "remove": {"action": f"remove-subset-{i}", "label": f"Remove subset {i + 1}"},
                        "fields": [self[f"s{i}-ready"], self[f"s{i}-not_ready"], self[f"s{i}-ports"]],
                        "help": "Every address serves every port of its subset."})
        return out

    @classmethod
    def group_value(cls, values, names):
        # The subset fields that are filled in (an emptied subset is no subset; the count is not shown).
        value = super().group_value(values, names)
        return value if len(names) == 1 else [(n, v) for n, v in value if n != "subsets"]

    @classmethod
    def part_label(cls, name):
        """"s0-not_ready" -> "Subset 1, not ready"."""
        index, part = name[1:].split("-", 1)
        return f"Subset {int(index) + 1}, {part.replace('_', ' ')}"

    def comparable(self):
        out = [(n, f.label or n, (n,)) for n, f in self.fields.items() if n == "labels"]
        subset_fields = ("subsets",) + tuple(n for n in self.fields if re.match(r"s\d+-", n))
        out.append(("subsets", "Subsets", subset_fields))
        return out

    @staticmethod
    def restructure(data: dict, action: str) -> dict | None:
        """The "add subset" / "remove subset N" buttons: new form data, or None (a save)."""
        try:
            count = max(0, min(int(data.get("subsets") or 0), MAX_SUBSETS))
        except ValueError:
            count = 0
        if action == "add-subset":
            data["subsets"] = str(min(count + 1, MAX_SUBSETS))
            return data
        m = re.fullmatch(r"remove-subset-(\d+)", action or "")
        if not m:
            return None
        gone = int(m.group(1))
        for i in range(gone, count):
            for suffix in ("ready", "not_ready", "ports"):
                data[f"s{i}-{suffix}"] = data.get(f"s{i + 1}-{suffix}", "") if i + 1 < count else ""
        for suffix in ("ready", "not_ready", "ports"):
            data.pop(f"s{count - 1}-{suffix}", None)
        data["subsets"] = str(max(count - 1, 0))
        return data


# ---------------------------------------------------------------------------------------------
# Overview: a namespace's Endpoints, from the typed columns


def overview_counts(rows) -> dict[str, dict]:
    """namespace -> {"objects", "ready", "not_ready", "healthy"} sums."""
    return {row.pop("namespace"): row for row in rows.values("namespace").annotate(
        objects=Count("id"), ready=Sum("ready_addresses"), not_ready=Sum("not_ready_addresses"),
        healthy=Count("id", filter=Q(not_ready_addresses=0, ready_addresses__gt=0))).order_by()}


def overview_card(sums: dict | None, now: datetime) -> dict:
    return {"objects": 0, "ready": 0, "not_ready": 0, "healthy": 0, **(sums or {})}


# ---------------------------------------------------------------------------------------------
# One-click actions and the declaration


def readiness(data, namespace: str, name: str, principal, through):
    """The Mark ready / Mark not ready buttons: POST ip, ready=true|false."""
    ip = data.get("ip", "")
    ready = data.get("ready") == "true"
    result = do_set_address_readiness(namespace, name, ip=ip, ready=ready, acting=principal, through=through)
    return result, f"{ip} marked {'ready' if ready else 'not ready'}."


def summarize(items: list[dict]) -> dict:
    """The list page's namespace roll-up (partial "rollup"), from the cards it shows."""
    return {"rollup": endpoints_rollup(items)}


def _readiness(obj: dict | None) -> set[tuple[str, bool]]:
    return {(a.get("ip", ""), ready) for subset in (obj or {}).get("subsets") or ()
            for key, ready in (("addresses", True), ("notReadyAddresses", False)) for a in subset.get(key) or ()}


def change_facts(before: dict | None, after: dict | None) -> list[str]:
    """What changed (issue 38): "changed readiness" when an address became ready or not ready."""
    if before is None or after is None:
        return []
    was, now = dict(_readiness(before)), dict(_readiness(after))
    return ["changed readiness"] if any(ip in now and now[ip] != ready for ip, ready in was.items()) else []


ENDPOINTS_SORTS = (
    # "Not ready" first when descending: the objects that need attention.
    kinds.Sort("not_ready", "Not ready addresses", ("not_ready_addresses",), lambda v, now: v[0]),
    kinds.Sort("ready", "Ready addresses", ("ready_addresses",), lambda v, now: v[0]),
    kinds.Sort("ports", "Ports", ("ports",), lambda v, now: v[0]),
)


# The cards' facts as columns, as the export writes them (kinds.Column).
ENDPOINTS_COLUMNS = (
    kinds.NAME_COLUMN,
    kinds.column("health", "Health", ("Health", "health_text")),
    kinds.column("ready", "Ready addresses", ("Ready", "ready"), sort="ready"),
    kinds.column("partial", "Partly ready addresses", ("Partly ready", "partial")),
    kinds.column("not_ready", "Not ready addresses", ("Not ready", "not_ready"), sort="not_ready"),
    kinds.column("ports", "Ports", ("Ports", lambda item: " ".join(p["text"] for p in item["ports"])), sort="ports"),
    kinds.AGE_COLUMN,
)


ENDPOINTS_STATES = (   # ?state=: all ready (the overview's healthy ones), or any address not ready
    kinds.State("ready", "All ready", ("ready_addresses", "not_ready_addresses"), lambda v, now: v[0] > 0 and not v[1],
                where=Q(ready_addresses__gt=0, not_ready_addresses=0)),
    kinds.State("not-ready", "Any not ready", ("not_ready_addresses",), lambda v, now: v[0] > 0,
                where=Q(not_ready_addresses__gt=0)),
)


ENDPOINTS_PAGES = kinds.register(kinds.KindWeb(
    kind="Endpoints", plural="endpoints", detail_view="endpoints_detail", title="Endpoints",
    heading="Endpoints readiness", noun="Endpoints object", list_noun="Endpoints objects",
    stylesheets=("core/endpoints.css",),
    present=present_endpoints, count_by="health", form=EndpointsForm,
    overview=kinds.Overview(counts=overview_counts, card=overview_card, count_key="objects",
                            warn_key="not_ready"),
    change_facts=change_facts,
    create_initial={"subsets": "1"},
    yaml_skeleton={"subsets": [{"addresses": [{"ip": "10.0.0.1"}],
                                "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}]},
    # Its buttons are in the detail page's readiness panel (core/endpoints_detail.html#readiness).
    actions=(kinds.Action("readiness", "endpoints_readiness", readiness, toolbar=False),),
    wrapper="div",   # cards
    summarize=summarize, summary_partial="rollup",
    sorts=ENDPOINTS_SORTS,
    states=ENDPOINTS_STATES,
    columns=ENDPOINTS_COLUMNS,
))
