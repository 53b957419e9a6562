"""Forms that create and edit Leases, Endpoints and Jobs, and the YAML editor's helpers.

A form only translates between what a person types and the object. Every rule lives in the
API strategies: a save builds the object, decodes it with kube.views.decode_object (Strict)
and goes through the store, exactly like an API request. So a form accepts what the API
accepts and nothing else, and the API's 422 causes are mapped back to the fields (and lines)
that produced them, in plain words.

One generic mechanism (ObjectForm) with small per-kind declarations: the fields, how an
object fills them (data_from_object), how they change an object (apply), and which API paths
belong to which field (CAUSES).
"""
from __future__ import annotations

import copy
import json
import re
from datetime import datetime, timezone
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from dashboard.core.strategy import make_subset
from dashboard.kube import codec
from dashboard.kube.formats import format_micro_time, parse_time

UTC = timezone.utc


# ---------------------------------------------------------------------------------------------
# Text formats: what a person types <-> values


def numbered_lines(text: str) -> list[tuple[int, str]]:
    """Non-blank lines with their 1-based line numbers (blank lines are allowed anywhere)."""
    return [(n, line.strip()) for n, line in enumerate((text or "").splitlines(), 1) if line.strip()]


def parse_labels(text: str) -> dict[str, str]:
    """`key=value` per line. Whether keys and values are valid labels is the API's call."""
    labels: dict[str, str] = {}
    problems = []
    for n, line in numbered_lines(text):
        key, eq, value = line.partition("=")
        if not eq:
            problems.append(f"Line {n}: write each label as key=value.")
            continue
        labels[key.strip()] = value.strip()
    if problems:
        raise ValidationError(problems)
    return labels


def format_labels(labels: dict | None) -> str:
    return "\n".join(f"{k}={v}" for k, v in sorted((labels or {}).items()))


def parse_time_text(text: str, now: datetime | None = None) -> str | None:
    """A time as typed -> metav1.MicroTime text (UTC, six fractional digits), or None if blank.

    Accepts RFC 3339 (with Z or an offset), a datetime-local value without a zone (read as
    UTC), a space instead of the T, and the word "now".
    """
    text = (text or "").strip()
    if not text:
        return None
    if text.lower() == "now":
        return format_micro_time(now or datetime.now(UTC))
    candidate = text.replace(" ", "T", 1)
    if candidate.endswith("z"):
        candidate = candidate[:-1] + "Z"
    moment = parse_time(candidate)
    if moment is None:
        raise ValidationError("Enter a time like 2025-01-02T03:04:05Z (RFC 3339, UTC) or “now”.")
    return format_micro_time(moment)


def parse_address_line(line: str) -> dict:
    """`ip [hostname|-] [nodeName]` -> an EndpointAddress (validity is the API's call)."""
    parts = line.split()
    if len(parts) > 3:
        raise ValueError("write at most: IP, hostname (or -) and node name")
    address = {"ip": parts[0]}
    if len(parts) > 1 and parts[1] != "-":
        address["hostname"] = parts[1]
    if len(parts) > 2 and parts[2] != "-":
        address["nodeName"] = parts[2]
    return address


def format_address(address: dict) -> str:
    parts = [address.get("ip", "")]
    if address.get("hostname") or address.get("nodeName"):
        parts.append(address.get("hostname") or "-")
    if address.get("nodeName"):
        parts.append(address["nodeName"])
    return " ".join(parts)


def parse_port_line(line: str) -> dict:
    """`[name] port [protocol]` -> an EndpointPort. The number is the token that locates it."""
    parts = line.split()
    numeric = [i for i, p in enumerate(parts) if re.fullmatch(r"-?\d+", p)]
    if not numeric or len(parts) > 3:
        raise ValueError("write [name] port [protocol], e.g. “http 80 TCP”")
    at = numeric[0] if len(parts) < 3 else 1
    if at > 1 or not re.fullmatch(r"-?\d+", parts[at]):
        raise ValueError("write [name] port [protocol], e.g. “http 80 TCP”")
    port: dict[str, Any] = {"port": int(parts[at])}
    if at == 1:
        port["name"] = parts[0]
    if at + 1 < len(parts):
        port["protocol"] = parts[at + 1]
    return port


def format_port(port: dict) -> str:
    parts = [port["name"]] if port.get("name") else []
    parts.append(str(port.get("port", "")))
    parts.append(port.get("protocol") or "TCP")
    return " ".join(parts)


def parse_env(text: str) -> list[dict]:
    env, problems = [], []
    for n, line in numbered_lines(text):
        name, eq, value = line.partition("=")
        if not eq:
            problems.append(f"Line {n}: write each variable as NAME=value.")
            continue
        env.append({"name": name.strip(), "value": value})
    if problems:
        raise ValidationError(problems)
    return env


def format_env(env: list | None) -> str:
    return "\n".join(f"{e.get('name', '')}={e.get('value', '')}" for e in env or () if "valueFrom" not in e)


# ---------------------------------------------------------------------------------------------
# API errors in plain words

_VALUE = r'(?:"(?:[^"\\]|\\.)*"|\{.*\}|\[.*\]|[^:]*)'
_PLAIN = [
    (re.compile(rf"^Invalid value: (?P<v>{_VALUE}): (?P<d>.+)$", re.S), "{d}"),
    (re.compile(rf"^Invalid value: (?P<v>{_VALUE})$", re.S), "{v} is not a valid value"),
    (re.compile(r"^Required value: (?P<d>.+)$", re.S), "Required: {d}"),
    (re.compile(r"^Required value$"), "This is required."),
    (re.compile(rf"^Unsupported value: (?P<v>{_VALUE}): supported values: (?P<d>.+)$", re.S),
     "{v} is not supported; use one of {d}"),
    (re.compile(rf"^Duplicate value: (?P<v>{_VALUE})$", re.S), "{v} appears more than once"),
    (re.compile(r"^Forbidden: (?P<d>.+)$", re.S), "{d}"),
    (re.compile(r"^Too long: (?P<d>.+)$", re.S), "Too long: {d}"),
    (re.compile(rf"^Too many: {_VALUE}: (?P<d>.+)$", re.S), "Too many: {d}"),
]


def plain(message: str, keep_value: bool = False) -> str:
    """An apimachinery field error message without its "Invalid value: X:" preamble (the value
    is right there in the field), starting with a capital letter. keep_value: say which value,
    for fields that hold several (labels)."""
    for pattern, template in _PLAIN:
        m = pattern.match(message or "")
        if m:
            text = template.format(**m.groupdict())
            if keep_value and "v" in m.groupdict() and "{v}" not in template:
                return _tidy(f"{m.group('v')}: {text[:1].upper()}{text[1:]}")
            break
    else:
        text = message or "is not valid"
    return _tidy(text[:1].upper() + text[1:])


def _tidy(text: str) -> str:
    """Drop the regular expression apimachinery appends to format errors: the examples before
    it say the same in plain words."""
    return re.sub(r",? regex used for validation is '[^']*'", "", text)


_DECODE = re.compile(r"cannot unmarshal (?P<got>.+?) into Go struct field \w+\.(?P<path>\S+) of type (?P<type>\S+)")


def decode_error_field(detail: str) -> tuple[str, str] | None:
    """(API path, plain message) of a JSON type error from decode_object, if it names a field."""
    m = _DECODE.search(detail or "")
    if not m:
        return None
    wanted = m.group("type")
    if wanted in ("int32", "int64"):
        bits = 31 if wanted == "int32" else 63
        text = f"Enter a whole number between {-2 ** bits} and {2 ** bits - 1}."
    else:
        text = f"This value has the wrong type (expected {wanted})."
    return m.group("path"), text


# ---------------------------------------------------------------------------------------------
# The generic form


def _put(target: dict, key: str, value: Any) -> None:
    """Set a field, or drop it when the form left it empty (None / "")."""
    if value is None or value == "" or value == {} or value == []:
        if target.get(key) == "" and value == "":
            return  # an explicitly empty string stays as it was
        target.pop(key, None)
    else:
        target[key] = value


def _text(value: Any) -> str:
    return "" if value is None else str(value)


class ObjectForm(forms.Form):
    """Common fields (name, namespace, labels) and the cause -> field mapping.

    Subclasses declare KIND, their own fields, CAUSES (API path prefix -> field name; a
    prefix ending in "[" takes a list index that becomes a line number) and implement
    data_from_object() and apply().
    """

    KIND = ""
    CREATE_ONLY: tuple[str, ...] = ("name", "namespace")
    EDIT_ONLY: tuple[str, ...] = ()
    CAUSES: tuple[tuple[str, str], ...] = ()
    COMMON_CAUSES = (("metadata.name", "name"), ("metadata.generateName", "name"),
                     ("metadata.namespace", "namespace"), ("metadata.labels", "labels"))

    name = forms.CharField(required=False, label="Name",
                           help_text="Lowercase letters, digits, “-” and “.”; unique in its namespace.",
                           widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false",
                                                         "autocapitalize": "off"}))
    namespace = forms.CharField(required=False, label="Namespace",
                                widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false",
                                                              "autocapitalize": "off", "list": "known-namespaces"}))
    labels = forms.CharField(required=False, label="Labels", help_text="One key=value per line.",
                             widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false", "class": "mono"}))

    def __init__(self, data=None, *, mode: str = "create", namespaces: list[str] | None = None,
                 limited: bool = False, **kwargs):
        super().__init__(data, **kwargs)
        self.mode = mode
        self.line_maps: dict[str, list[int]] = {}   # field -> source line of each parsed item
        drop = self.EDIT_ONLY if mode == "create" else self.CREATE_ONLY
        for name in drop:
            self.fields.pop(name, None)
        if "namespace" in self.fields and limited and namespaces:
            # A namespace-limited user picks one of theirs.
            self.fields["namespace"] = forms.ChoiceField(label="Namespace", choices=[(n, n) for n in namespaces])
        self.size_textareas()

    def size_textareas(self) -> None:
        """Textareas tall enough for what they hold (and a line to add one more)."""
        source = self.data if self.is_bound else self.initial
        for name, field in self.fields.items():
            if isinstance(field.widget, forms.Textarea):
                lines = len(str(source.get(name) or "").splitlines())
                field.widget.attrs["rows"] = max(int(field.widget.attrs.get("rows", 2)), min(lines + 1, 16))

    # -- declarations -----------------------------------------------------------------------

    @classmethod
    def data_from_object(cls, obj: dict) -> dict[str, str]:
        """The object as this form's fields show it (strings, as a browser posts them)."""
        meta = obj.get("metadata") or {}
        return {"name": meta.get("name", ""), "namespace": meta.get("namespace", ""),
                "labels": format_labels(meta.get("labels"))}

    def apply(self, obj: dict) -> dict:
        """Write the cleaned values into obj (a copy of the current object, or a skeleton)."""
        meta = obj.setdefault("metadata", {})
        if self.mode == "create":
            meta["name"] = self.cleaned_data.get("name", "")
        _put(meta, "labels", self.cleaned_data.get("labels"))
        return obj

    def skeleton(self) -> dict:
        return {"metadata": {}}

    def new_object(self) -> dict:
        return self.apply(self.skeleton())

    def sections(self) -> list[dict]:
        """The form's layout: fieldsets of bound fields (templates/web/edit/form.html)."""
        names = [n for n in ("name", "namespace", "labels") if n in self.fields]
        return [{"legend": "Object", "fields": [self[n] for n in names]}]

    # -- conflicts --------------------------------------------------------------------------

    def comparable(self) -> list[tuple[str, str, tuple[str, ...]]]:
        """(key, label, raw field names) of what a conflict page compares and merges."""
        return [(n, f.label or n, (n,)) for n, f in self.fields.items() if n not in ("name", "namespace")]

    @staticmethod
    def display(value: Any) -> str:
        if value is None or value == "":
            return "(not set)"
        if isinstance(value, bool):
            return "yes" if value else "no"
        if isinstance(value, dict):
            return format_labels(value) or "(none)"
        if isinstance(value, (list, tuple)):
            return "\n".join(ObjectForm.display(v) if isinstance(v, (list, tuple)) else _item_text(v)
                             for v in value) or "(none)"
        return str(value)

    # -- API errors -> fields ---------------------------------------------------------------

    def locate(self, path: str) -> tuple[str | None, str]:
        """The field an API path belongs to, and a prefix for the message ("Line 2: ")."""
        for prefix, field in sorted(self.COMMON_CAUSES + self.CAUSES, key=lambda c: -len(c[0])):
            if prefix.endswith("["):
                if not path.startswith(prefix):
                    continue
            elif not (path == prefix or path.startswith((prefix + ".", prefix + "["))):
                continue
            if field not in self.fields:
                return None, ""
            rest = path[len(prefix):]
            if prefix.endswith("["):
                m = re.match(r"(\d+)\](?:\.(\w+))?", rest)
                return field, (self.line_hint(field, int(m.group(1)), m.group(2)) if m else "")
            if rest.startswith("["):
                return field, f"{rest.strip('[]')}: "   # e.g. metadata.labels[key]
            return field, ""
        return None, ""

    def line_hint(self, field: str, index: int, part: str | None) -> str:
        """"Line 3 (hostname): " for the index-th item parsed from a textarea field."""
        lines = self.line_maps.get(field) or []
        line = lines[index] if index < len(lines) else index + 1
        return f"Line {line}" + (f" ({part})" if part else "") + ": "

    def add_api_error(self, err) -> None:
        """Put an ApiError from the store next to the fields it is about."""
        from dashboard.kube.schema import DecodeError

        details = err.details or {}
        causes = details.get("causes") or []
        if err.code == 422 and causes:
            found: list[tuple[str | None, str]] = []
            for cause in self._without_derived(causes):
                path = cause.get("field") or ""
                field, hint = self.locate(path)
                # Which value, when the field holds several and no line number says it.
                several = field in self.fields and isinstance(self.fields[field].widget, forms.Textarea)
                text = plain(cause.get("message", ""), keep_value=several and not hint)
                found.append((field, hint + text) if field else (None, f"{path}: {text}" if path else text))
            for field, message in _distinct(found):
                self.add_error(field, message)
            return
        if err.code == 409 and err.reason == "AlreadyExists" and "name" in self.fields:
            self.add_error("name", f"A {self.KIND} with this name already exists in this namespace.")
            return
        if isinstance(err, DecodeError) or err.code == 400:
            located = decode_error_field(getattr(err, "detail", err.message))
            if located:
                field, hint = self.locate(located[0])
                if field:
                    self.add_error(field, hint + located[1])
                    return
        self.add_error(None, err.message)

    def _without_derived(self, causes: list[dict]) -> list[dict]:
        """A Job's generated labels carry its name: an invalid name is reported again as an
        invalid label the user never typed. When the name is reported, drop those."""
        name = (self.cleaned_data or {}).get("name") or ""
        if not name or not any(self.locate(c.get("field") or "")[0] == "name" for c in causes):
            return causes
        typed = self.data.get("labels", "") if self.is_bound else ""
        return [c for c in causes if not ("labels" in (c.get("field") or "") and f'"{name}"' in c.get("message", "")
                                          and name not in typed)]

    def clean_labels(self):
        return parse_labels(self.cleaned_data.get("labels", ""))


def _distinct(found: list[tuple[str | None, str]]) -> list[tuple[str | None, str]]:
    """kube reports some problems twice, sometimes once more with an example appended (an IP
    is checked twice): say each once, in its longer form."""
    out: list[tuple[str | None, str]] = []
    for field, message in found:
        same = [i for i, (f2, m2) in enumerate(out) if f2 == field
                and (m2.startswith(message.rstrip(".")) or message.startswith(m2.rstrip(".")))]
        if not same:
            out.append((field, message))
        elif len(message) > len(out[same[0]][1]):
            out[same[0]] = (field, message)
    return out


def _item_text(value: Any) -> str:
    if isinstance(value, dict):
        if "ip" in value:
            return format_address(value)
        if "port" in value:
            return format_port(value)
        if "name" in value and "value" in value:
            return f"{value['name']}={value['value']}"
    return str(value)


def _line_list_field(label: str, help_text: str, rows: int = 3) -> forms.CharField:
    return forms.CharField(required=False, label=label, help_text=help_text,
                           widget=forms.Textarea(attrs={"rows": rows, "spellcheck": "false", "class": "mono"}))


def _time_field(label: str, help_text: str) -> forms.CharField:
    return forms.CharField(required=False, label=label, help_text=help_text,
                           widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false",
                                                         "class": "mono", "placeholder": "2025-01-02T03:04:05Z"}))


# ---------------------------------------------------------------------------------------------
# Lease


class LeaseForm(ObjectForm):
    KIND = "Lease"
    CAUSES = (("spec.holderIdentity", "holder"), ("spec.leaseDurationSeconds", "duration"),
              ("spec.acquireTime", "acquire_time"), ("spec.renewTime", "renew_time"),
              ("spec.leaseTransitions", "transitions"))
    TIME_HELP = "UTC, RFC 3339 (e.g. 2025-01-02T03:04:05Z), or “now”. Empty: not set."

    holder = forms.CharField(required=False, strip=False, label="Holder identity",
                             help_text="Who holds the lease. Empty: nobody.",
                             widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}))
    duration = forms.IntegerField(required=False, label="Lease duration (seconds)",
                                  help_text="How long other candidates wait after the last renewal before taking over.")
    acquire_time = _time_field("Acquire time", TIME_HELP)
    renew_time = _time_field("Renew time", TIME_HELP)
    transitions = forms.IntegerField(required=False, label="Leader transitions",
                                     help_text="How many times the lease changed holders.")

    @classmethod
    def data_from_object(cls, obj):
        data = super().data_from_object(obj)
        spec = obj.get("spec") or {}
        data.update(holder=spec.get("holderIdentity") or "", duration=_text(spec.get("leaseDurationSeconds")),
                    acquire_time=spec.get("acquireTime") or "", renew_time=spec.get("renewTime") or "",
                    transitions=_text(spec.get("leaseTransitions")))
        return data

    def clean_acquire_time(self):
        return parse_time_text(self.cleaned_data.get("acquire_time"))

    def clean_renew_time(self):
        return parse_time_text(self.cleaned_data.get("renew_time"))

    def apply(self, obj):
        super().apply(obj)
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
        obj["spec"] = spec
        c = self.cleaned_data
        _put(spec, "holderIdentity", c.get("holder"))
        _put(spec, "leaseDurationSeconds", c.get("duration"))
        _put(spec, "acquireTime", c.get("acquire_time"))
        _put(spec, "renewTime", c.get("renew_time"))
        _put(spec, "leaseTransitions", c.get("transitions"))
        return obj

    def sections(self):
        return super().sections() + [{"legend": "Holder", "fields": [
            self[n] for n in ("holder", "duration", "acquire_time", "renew_time", "transitions")]}]


def release_spec(spec: dict, now: datetime) -> dict:
    """What client-go's LeaderElector.release() writes: no holder, a 1 s duration, acquire and
    renew time now, the transition count kept, so the next candidate may take over at once.
    (strategy / preferredHolder describe the lease, not its holder: they are kept.)"""
    out = dict(spec)
    stamp = format_micro_time(now)
    out.update(holderIdentity="", leaseDurationSeconds=1, acquireTime=stamp, renewTime=stamp)
    return out


# ---------------------------------------------------------------------------------------------
# Endpoints


MAX_SUBSETS = 50


class EndpointsForm(ObjectForm):
    """Subsets as three textareas each (ready addresses, not-ready addresses, ports), added
    and removed with submit buttons (no JavaScript). Fields the form does not show (an
    address's targetRef, a port's appProtocol) are kept for the addresses and ports that
    stay."""

    KIND = "Endpoints"
    ADDRESS_HELP = "One per line: IP, then optionally hostname (or -) and node name, e.g. 10.1.0.5 web-0 node-a"
    PORT_HELP = "One per line: [name] port [protocol], e.g. http 80 TCP"

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
            self.fields[f"s{i}-ready"] = _line_list_field(f"Ready addresses (subset {n})", self.ADDRESS_HELP)
            self.fields[f"s{i}-not_ready"] = _line_list_field(f"Not-ready addresses (subset {n})", self.ADDRESS_HELP)
            self.fields[f"s{i}-ports"] = _line_list_field(f"Ports (subset {n})", self.PORT_HELP, rows=2)
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
        return cleaned

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
        _put(obj, "subsets", subsets)
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
                        "fields": [self[f"s{i}-ready"], self[f"s{i}-not_ready"], self[f"s{i}-ports"]],
                        "help": "Every address serves every port of its subset."})
        return out

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


def set_readiness(obj: dict, ip: str, ready: bool) -> bool:
    """Move every address with this IP to `addresses` (ready) or `notReadyAddresses`, in every
    subset that has it. False when no address has this IP (nothing to move)."""
    found = False
    source, target = ("notReadyAddresses", "addresses") if ready else ("addresses", "notReadyAddresses")
    for subset in obj.get("subsets") or []:
        moving = [a for a in subset.get(source) or [] if a.get("ip") == ip]
        found = found or bool(moving) or any(a.get("ip") == ip for a in subset.get(target) or [])
        if not moving:
            continue
        subset[source] = [a for a in subset[source] if a.get("ip") != ip]
        subset[target] = (subset.get(target) or []) + moving
        if not subset[source]:
            del subset[source]
    return found


# ---------------------------------------------------------------------------------------------
# Job


class JobForm(ObjectForm):
    """On create: the spec fields and one container. On edit the pod template and the
    completion mode are immutable (the API says so), so they are shown, not offered."""

    KIND = "Job"
    CREATE_ONLY = ("name", "namespace", "completion_mode", "container_name", "image", "command", "env",
                   "restart_policy")
    CONTAINER = "spec.template.spec.containers[0]"
    CAUSES = (("spec.completions", "completions"), ("spec.parallelism", "parallelism"),
              ("spec.completionMode", "completion_mode"), ("spec.backoffLimit", "backoff_limit"),
              ("spec.activeDeadlineSeconds", "active_deadline_seconds"),
              ("spec.ttlSecondsAfterFinished", "ttl_seconds_after_finished"), ("spec.suspend", "suspend"),
              (CONTAINER + ".name", "container_name"), (CONTAINER + ".image", "image"),
              (CONTAINER + ".command", "command"), (CONTAINER + ".env[", "env"),
              ("spec.template.spec.restartPolicy", "restart_policy"))

    completions = forms.IntegerField(required=False, label="Completions",
                                     help_text="Successful pods needed. Empty: 1 (with parallelism empty too).")
    parallelism = forms.IntegerField(required=False, label="Parallelism", help_text="Pods running at once. Empty: 1.")
    completion_mode = forms.ChoiceField(label="Completion mode", initial="NonIndexed",
                                        choices=[("NonIndexed", "NonIndexed"), ("Indexed", "Indexed")],
                                        help_text="Indexed: each pod gets an index 0…completions−1.")
    backoff_limit = forms.IntegerField(required=False, label="Backoff limit",
                                       help_text="Retries before the job fails. Empty: 6.")
    active_deadline_seconds = forms.IntegerField(required=False, label="Active deadline (seconds)",
                                                 help_text="Fail the job after this long. Empty: no deadline.")
    ttl_seconds_after_finished = forms.IntegerField(required=False, label="Delete after finished (seconds)",
                                                    help_text="ttlSecondsAfterFinished. Empty: keep.")
    suspend = forms.BooleanField(required=False, label="Suspended", help_text="No pods run while suspended.")
    container_name = forms.CharField(required=False, label="Container name", initial="main",
                                     widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}))
    image = forms.CharField(required=False, label="Image", help_text="e.g. busybox:1.36",
                            widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}))
    command = _line_list_field("Command", "One argument per line, e.g. sh / -c / echo hello. Empty: the image’s entrypoint.")
    env = _line_list_field("Environment", "One NAME=value per line.")
    restart_policy = forms.ChoiceField(label="Pod restart policy", initial="Never",
                                       choices=[("Never", "Never"), ("OnFailure", "OnFailure")])

    @classmethod
    def data_from_object(cls, obj):
        data = super().data_from_object(obj)
        spec = obj.get("spec") or {}
        data.update(completions=_text(spec.get("completions")), parallelism=_text(spec.get("parallelism")),
                    completion_mode=spec.get("completionMode") or "NonIndexed",
                    backoff_limit=_text(spec.get("backoffLimit")),
                    active_deadline_seconds=_text(spec.get("activeDeadlineSeconds")),
                    ttl_seconds_after_finished=_text(spec.get("ttlSecondsAfterFinished")))
        if spec.get("suspend"):
            data["suspend"] = "on"
        pod = (spec.get("template") or {}).get("spec") or {}
        container = (pod.get("containers") or [{}])[0]
        data.update(container_name=container.get("name", ""), image=container.get("image", ""),
                    command="\n".join(container.get("command") or []), env=format_env(container.get("env")),
                    restart_policy=pod.get("restartPolicy") or "")
        return data

    def clean_command(self):
        return [line for _, line in numbered_lines(self.cleaned_data.get("command", ""))]

    def clean_env(self):
        items = parse_env(self.cleaned_data.get("env", ""))
        self.line_maps["env"] = [n for n, _ in numbered_lines(self.cleaned_data.get("env", ""))]
        return items

    def skeleton(self):
        c = self.cleaned_data
        container: dict[str, Any] = {"name": c.get("container_name") or "", "image": c.get("image") or ""}
        if c.get("command"):
            container["command"] = c["command"]
        if c.get("env"):
            container["env"] = c["env"]
        return {"metadata": {}, "spec": {"completionMode": c.get("completion_mode") or "NonIndexed",
                                         "template": {"spec": {"containers": [container],
                                                               "restartPolicy": c.get("restart_policy") or ""}}}}

    def apply(self, obj):
        super().apply(obj)
        spec = obj.setdefault("spec", {})
        c = self.cleaned_data
        for field, key in (("completions", "completions"), ("parallelism", "parallelism"),
                           ("backoff_limit", "backoffLimit"), ("active_deadline_seconds", "activeDeadlineSeconds"),
                           ("ttl_seconds_after_finished", "ttlSecondsAfterFinished")):
            _put(spec, key, c.get(field))
        spec["suspend"] = bool(c.get("suspend"))
        return obj

    def sections(self):
        out = super().sections()
        out.append({"legend": "Run", "fields": [self[n] for n in (
            "completions", "parallelism", "completion_mode", "backoff_limit", "active_deadline_seconds",
            "ttl_seconds_after_finished", "suspend") if n in self.fields]})
        if self.mode == "create":
            out.append({"legend": "Container", "fields": [self[n] for n in (
                "container_name", "image", "command", "env", "restart_policy")],
                "help": "The pod template. It cannot be changed after the job is created."})
        return out


def job_template_facts(obj: dict) -> list[tuple[str, str]]:
    """The immutable part of a Job, for the edit page to show (not offer)."""
    spec = obj.get("spec") or {}
    pod = (spec.get("template") or {}).get("spec") or {}
    facts = [("Completion mode", spec.get("completionMode") or "NonIndexed"),
             ("Pod restart policy", pod.get("restartPolicy") or "—")]
    for c in pod.get("containers") or []:
        facts.append((f"Container “{c.get('name', '')}” image", c.get("image") or "—"))
        if c.get("command"):
            facts.append(("Command", " ".join(c["command"])))
        if c.get("args"):
            facts.append(("Arguments", " ".join(c["args"])))
        if c.get("env"):
            facts.append(("Environment", format_env(c["env"]) or "(from references)"))
    return facts


FORMS: dict[str, type[ObjectForm]] = {"Lease": LeaseForm, "Endpoints": EndpointsForm, "Job": JobForm}


# ---------------------------------------------------------------------------------------------
# Conflicts: what changed, and the values a "reapply" submits


def _values(form_cls: type[ObjectForm], data: dict, mode: str) -> dict | None:
    form = form_cls(data, mode=mode)
    return form.cleaned_data if form.is_valid() else None


def conflict_view(form: ObjectForm, posted: dict, base: dict | None, current: dict) -> tuple[list[dict], dict]:
    """Compare the user's values with the current object (and with the version the form was
    loaded from, when the revision log still has it).

    Returns (rows for the table, form data for "reapply"). Reapplying submits the user's value
    for what the user changed and the current value for everything else, so another person's
    change to a field the user did not touch survives.
    """
    cls = type(form)
    current_data = cls.data_from_object(current)
    base_data = cls.data_from_object(base) if base is not None else None
    yours = form.cleaned_data
    now_values = _values(cls, current_data, form.mode) or {}
    base_values = (_values(cls, base_data, form.mode) or {}) if base_data is not None else None
    # The widest set of fields (Endpoints: the subsets of either version).
    probe = cls(current_data, mode=form.mode)
    groups = {key: (label, names) for key, label, names in probe.comparable()}
    for key, label, names in form.comparable():
        if key in groups:
            groups[key] = (label, tuple(dict.fromkeys(groups[key][1] + names)))
        else:
            groups[key] = (label, names)
    rows, merged = [], {}
    for key, (label, names) in groups.items():
        mine = _group_value(yours, names)
        theirs = _group_value(now_values, names)
        was = _group_value(base_values, names) if base_values is not None else None
        you_changed = base_values is None or mine != was
        they_changed = base_values is not None and was != theirs
        source = posted if you_changed else current_data
        for name in names:
            if name in source:
                merged[name] = source[name]
        if mine != theirs:
            note = _note(you_changed, they_changed)
            rows.append({"field": label, "yours": _group_display(cls, yours, names),
                         "current": _group_display(cls, now_values, names), "note": note,
                         "theirs_changed": they_changed})
    for name in ("name", "namespace"):
        if name in posted:
            merged[name] = posted[name]
    return rows, merged


def _note(you_changed: bool, they_changed: bool) -> str:
    """Who changed a field, and what "Reapply" does with it."""
    if you_changed and they_changed:
        return "changed by you and by someone else: reapplying saves yours"
    if they_changed:
        return "changed by someone else: reapplying keeps theirs"
    return "your change: reapplying saves it"


def _group_value(values: dict | None, names: tuple[str, ...]):
    if values is None:
        return None
    if len(names) == 1:
        return values.get(names[0])
    # A subset group: the filled-in subset fields (an emptied subset is no subset).
    return [(n, values.get(n)) for n in names if n != "subsets" and values.get(n)]


def _subset_field_label(name: str) -> str:
    """"s0-not_ready" -> "Subset 1, not ready"."""
    index, part = name[1:].split("-", 1)
    return f"Subset {int(index) + 1}, {part.replace('_', ' ')}"


def _group_display(cls, values: dict, names: tuple[str, ...]) -> str:
    if len(names) == 1:
        return ObjectForm.display(values.get(names[0]))
    lines = [f"{_subset_field_label(n)}: " + ", ".join(_item_text(v) for v in items)
             for n, items in _group_value(values, names)]
    return "\n".join(lines) or "(none)"


# ---------------------------------------------------------------------------------------------
# The YAML editor


def load_yaml(text: str) -> dict:
    """Parse the editor's text; ValidationError (with line and column) when it is not YAML or
    not a mapping."""
    try:
        obj = codec.load_yaml(text)
    except codec.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"Line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ValidationError(f"{where}this is not valid YAML ({problem}).")
    if not isinstance(obj, dict):
        raise ValidationError("The YAML must be one object (a mapping with apiVersion, kind, metadata …).")
    return obj


class YamlForm(forms.Form):
    yaml = forms.CharField(required=False, label="Object (YAML)", strip=False,
                           help_text="The whole object, as kubectl edit shows it. Unknown fields are an error.",
                           widget=forms.Textarea(attrs={"rows": 20, "spellcheck": "false", "class": "mono yaml-input",
                                                        "autocapitalize": "off", "autocomplete": "off",
                                                        "wrap": "off"}))

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        source = self.data if self.is_bound else self.initial
        lines = len(str(source.get("yaml") or "").splitlines())
        self.fields["yaml"].widget.attrs["rows"] = max(12, min(lines + 2, 40))

    def clean_yaml(self):
        self.parsed = load_yaml(self.cleaned_data.get("yaml", ""))
        return self.cleaned_data["yaml"]

    def add_api_error(self, err) -> None:
        """Everything is one field here: causes are listed under it, with their paths."""
        causes = (err.details or {}).get("causes") or []
        detail = getattr(err, "detail", "") or ""
        unknown = re.findall(r'unknown field "([^"]+)"', detail)
        located = decode_error_field(detail)
        if err.code == 422 and causes:
            self.add_error("yaml", [f"{c.get('field')}: {plain(c.get('message', ''))}" if c.get("field")
                                    else plain(c.get("message", "")) for c in causes])
        elif unknown:
            self.add_error("yaml", [f"{path}: unknown field (check its spelling and indentation)."
                                    for path in unknown])
        elif located:
            self.add_error("yaml", f"{located[0]}: {located[1]}")
        else:
            self.add_error("yaml", err.message)


IGNORED_PATHS = ("metadata.resourceVersion", "metadata.managedFields", "metadata.generation", "metadata.uid",
                 "metadata.creationTimestamp", "status", "apiVersion", "kind")


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Leaves of an object by path ("spec.template.spec.containers[0].image")."""
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(value, list) and value:
        out = {}
        for i, item in enumerate(value):
            out.update(flatten(item, f"{prefix}[{i}]"))
        return out
    return {prefix: value}


def yaml_rows(yours: dict, base: dict | None, current: dict) -> list[dict]:
    """Differences between the edited object and the current one (server-owned fields and
    status left out: an update cannot change them)."""
    mine, theirs = flatten(yours), flatten(current)
    was = flatten(base) if base is not None else None
    rows = []
    for path in sorted(set(mine) | set(theirs)):
        if any(path == p or path.startswith(p + ".") or path.startswith(p + "[") for p in IGNORED_PATHS):
            continue
        if mine.get(path) == theirs.get(path):
            continue
        they_changed = was is not None and was.get(path) != theirs.get(path)
        you_changed = was is None or was.get(path) != mine.get(path)
        note = _note(you_changed, they_changed)
        rows.append({"field": path, "yours": _leaf(mine, path), "current": _leaf(theirs, path), "note": note,
                     "theirs_changed": they_changed})
    return rows


def _leaf(values: dict, path: str) -> str:
    if path not in values:
        return "(not set)"
    value = values[path]
    if value in ({}, []):
        return "(empty)"
    return value if isinstance(value, str) else json.dumps(value)


def merge_diff(base: Any, yours: Any) -> Any:
    """A JSON merge patch (RFC 7386) that turns base into yours (lists are replaced whole)."""
    if not isinstance(base, dict) or not isinstance(yours, dict):
        return copy.deepcopy(yours)
    patch: dict = {}
    for key in base:
        if key not in yours:
            patch[key] = None
    for key, value in yours.items():
        if key not in base:
            patch[key] = copy.deepcopy(value)
        elif base[key] != value:
            patch[key] = merge_diff(base[key], value)
    return patch


def reapply_yaml(yours: dict, base: dict | None, current: dict) -> dict:
    """The user's edit replayed on the current object: the changes they made to the version
    they loaded, as a merge patch onto the current one (all of theirs when that version is no
    longer in the revision log)."""
    from dashboard.kube.patch import merge_patch

    if base is None:
        out = copy.deepcopy(yours)
    else:
        out = merge_patch(copy.deepcopy(current), merge_diff(base, yours))
    out.setdefault("metadata", {})["resourceVersion"] = current["metadata"].get("resourceVersion", "")
    return out
