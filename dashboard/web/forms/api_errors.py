"""API errors in plain words: apimachinery's field messages without their preambles, and the
field a JSON decode error is about."""
from __future__ import annotations

import re

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


# Server-side apply conflicts: a 409 whose causes are FieldManagerConflict, one per field, as
# apimachinery's managedfields NewConflictError builds them (message "conflict with <manager>",
# where printManager writes `"m"`, `"m" with subresource "status"`, and for an Update manager
# `... using v1` or `... using v1 at 2024-05-01T10:00:00Z`; field: a fieldpath such as
# `.spec.containers[name="c"].image`).
_MANAGER = re.compile(r'^conflict with "(?P<m>(?:[^"\\]|\\.)*)"(?: with subresource "(?P<sub>[^"]*)")?'
                      r'(?: using (?P<api>\S+?)(?: at (?P<at>\S+))?)?$')


def field_manager_conflicts(err) -> list[str]:
    """Each field an apply could not take, in words: who manages it and what to do. [] when
    err is not an apply conflict."""
    if getattr(err, "code", None) != 409:
        return []
    out = []
    for cause in (getattr(err, "details", None) or {}).get("causes") or []:
        if cause.get("reason") != "FieldManagerConflict":
            continue
        field = (cause.get("field") or "").lstrip(".") or "a field"
        m = _MANAGER.match(cause.get("message") or "")
        if m is None:
            who = cause.get("message") or "another manager"
        else:
            who = f"“{m.group('m')}”"
            if m.group("sub"):
                who += f" (through /{m.group('sub')})"
            if m.group("api"):
                who += f", which last wrote it with an update ({m.group('api')}" + (
                    f", at {m.group('at')})" if m.group("at") else ")")
            else:
                who += ", which applied it"
        out.append(f"Field {field} is managed by {who}. Keep its value, leave it out of your change, "
                   "or take it over by applying with force.")
    return out
