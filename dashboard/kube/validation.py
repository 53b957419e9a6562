"""Generic validation helpers with kube-apiserver 1.32's rules and wording.

Everything here knows no kind: names (DNS-1123 subdomain / label, qualified names, ports,
environment variables, domain-prefixed paths), label and annotation maps, immutable fields, IP
addresses, ObjectMeta on create and update. The per-kind strategies (coordination/core/batch
``strategy.py``, core/pod_template.py) and selectors.py build on these.

Functions named ``is_*`` return a list of plain messages (apimachinery's util/validation
style); functions named ``validate_*`` return a list of field causes (``errors.Cause``).
"""
from __future__ import annotations

import ipaddress
import json
import re
from typing import Any, Callable, Iterable

from .errors import INVALID, TOO_LONG, Cause, forbidden, invalid, not_supported, required
from .schema import semantic_equal

# ---------------------------------------------------------------------------------------
# Message builders (k8s.io/apimachinery/pkg/util/validation)
# ---------------------------------------------------------------------------------------


def max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def regex_error(msg: str, fmt: str, *examples: str, go_spacing: bool = False) -> str:
    """"<msg> (e.g. 'a' or 'b', regex used for validation is '<fmt>')".

    go_spacing spells the examples exactly as apimachinery's RegexError does ("'a',  or 'b'"),
    as label selector errors print them; field causes keep the single-spaced wording they
    have always had here.
    """
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = (",  or " if go_spacing else " or ").join(f"'{e}'" for e in examples)
    return f"{msg} (e.g. {shown}, regex used for validation is '{fmt}')"


def empty_error() -> str:
    return "must be non-empty"


def inclusive_range_error(lo: int, hi: int) -> str:
    return f"must be between {lo} and {hi}, inclusive"


def go_list(values: Iterable[str]) -> str:
    """Go's %q of a []string: ["a" "b"]."""
    return "[" + " ".join(json.dumps(v) for v in values) + "]"


# ---------------------------------------------------------------------------------------
# Name formats
# ---------------------------------------------------------------------------------------

DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
                     "or '-', and must start and end with an alphanumeric character")
DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_FMT = DNS1123_LABEL_FMT + r"(\." + DNS1123_LABEL_FMT + ")*"
DNS1123_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                         "characters, '-' or '.', and must start and end with an alphanumeric character")
DNS1123_SUBDOMAIN_MAX = 253
QNAME_CHAR_FMT = "[A-Za-z0-9]"
QNAME_EXT_CHAR_FMT = "[-A-Za-z0-9_.]"
QUALIFIED_NAME_FMT = f"({QNAME_CHAR_FMT}{QNAME_EXT_CHAR_FMT}*)?{QNAME_CHAR_FMT}"
QUALIFIED_NAME_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and "
                      "end with an alphanumeric character")
QUALIFIED_NAME_MAX = 63
LABEL_VALUE_FMT = f"({QUALIFIED_NAME_FMT})?"
LABEL_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, "
                   "'-', '_' or '.', and must start and end with an alphanumeric character")
LABEL_VALUE_MAX = 63
CONFIG_MAP_KEY_FMT = "[-._a-zA-Z0-9]+"
CONFIG_MAP_KEY_MSG = "a valid config key must consist of alphanumeric characters, '-', '_' or '.'"
TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024   # bytes of keys + values
FIELD_IMMUTABLE = "field is immutable"
IS_NEGATIVE = "must be greater than or equal to 0"
MAX_INT32 = 2 ** 31 - 1

_DNS1123_LABEL = re.compile(f"^{DNS1123_LABEL_FMT}$")
_DNS1123_SUBDOMAIN = re.compile(f"^{DNS1123_SUBDOMAIN_FMT}$")
_QUALIFIED_NAME = re.compile(f"^{QUALIFIED_NAME_FMT}$")
_LABEL_VALUE = re.compile(f"^{LABEL_VALUE_FMT}$")
_CONFIG_MAP_KEY = re.compile(f"^{CONFIG_MAP_KEY_FMT}$")
_PORT_NAME_CHARS = re.compile(r"^[-a-z0-9]+$")
_HAS_LETTER = re.compile(r"[a-z]")
_HTTP_PATH = re.compile(r"^[A-Za-z0-9/\-._~%!$&'()*+,;=:]+$")


def _full(regex: re.Pattern, value: str) -> bool:
    # Go's MatchString with ^...$ does not accept a trailing newline; Python's $ would.
    return regex.fullmatch(value) is not None


def is_dns1123_label(value: str) -> list[str]:
    errs = []
    if len(value) > DNS1123_LABEL_MAX:
        errs.append(max_len_error(DNS1123_LABEL_MAX))
    if not _full(_DNS1123_LABEL, value):
        errs.append(regex_error(DNS1123_LABEL_MSG, DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    errs = []
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        errs.append(max_len_error(DNS1123_SUBDOMAIN_MAX))
    if not _full(_DNS1123_SUBDOMAIN, value):
        errs.append(regex_error(DNS1123_SUBDOMAIN_MSG, DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def is_qualified_name(value: str, go_spacing: bool = False) -> list[str]:
    """Label keys, annotation keys, finalizers: an optional DNS-subdomain prefix and a name."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part " + empty_error())
        else:
            errs.extend("prefix part " + m for m in is_dns1123_subdomain(prefix))
    else:
        return ["a qualified name " + regex_error(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT,
                                                  "MyName", "my.name", "123-abc", go_spacing=go_spacing)
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    if not name:
        errs.append("name part " + empty_error())
    elif len(name) > QUALIFIED_NAME_MAX:
        errs.append("name part " + max_len_error(QUALIFIED_NAME_MAX))
    if not _full(_QUALIFIED_NAME, name):
        errs.append("name part " + regex_error(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT,
                                               "MyName", "my.name", "123-abc", go_spacing=go_spacing))
    return errs


def is_valid_label_value(value: str, go_spacing: bool = False) -> list[str]:
    errs = []
    if len(value) > LABEL_VALUE_MAX:
        errs.append(max_len_error(LABEL_VALUE_MAX))
    if not _full(_LABEL_VALUE, value):
        errs.append(regex_error(LABEL_VALUE_MSG, LABEL_VALUE_FMT, "MyValue", "my_value", "12345",
                                go_spacing=go_spacing))
    return errs


def is_config_map_key(value: str) -> list[str]:
    errs = []
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        errs.append(max_len_error(DNS1123_SUBDOMAIN_MAX))
    if not _full(_CONFIG_MAP_KEY, value):
        errs.append(regex_error(CONFIG_MAP_KEY_MSG, CONFIG_MAP_KEY_FMT, "key.name", "KEY_NAME", "key-name"))
    if value == ".":
        errs.append("must not be '.'")
    elif value == "..":
        errs.append("must not be '..'")
    elif value.startswith(".."):
        errs.append("must not start with '..'")
    return errs


def is_valid_port_num(port: Any) -> list[str]:
    if isinstance(port, int) and not isinstance(port, bool) and 1 <= port <= 65535:
        return []
    return [inclusive_range_error(1, 65535)]


def is_valid_port_name(name: str) -> list[str]:
    """An IANA_SVC_NAME: at most 15 lowercase letters, digits and single inner hyphens."""
    errs = []
    if len(name) > 15:
        errs.append(max_len_error(15))
    if not _full(_PORT_NAME_CHARS, name):
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not _HAS_LETTER.search(name):
        errs.append("must contain at least one letter (a-z)")
    if "--" in name:
        errs.append("must not contain consecutive hyphens")
    if name and (name[0] == "-" or name[-1] == "-"):
        errs.append("must not begin or end with a hyphen")
    return errs


def is_relaxed_env_var_name(name: str) -> list[str]:
    """1.32 enables RelaxedEnvironmentVariableValidation (beta): printable ASCII but '='."""
    errs = []
    if not name:
        errs.append("environment variable name " + empty_error())
    if any(ord(c) > 126 or ord(c) < 32 or c == "=" for c in name):
        errs.append("a valid environment variable name must consist only of printable ASCII "
                    "characters other than '='")
    return errs


def name_is_dns_subdomain(name: str, prefix: bool = False) -> list[str]:
    """ValidateNameFunc for Lease, Endpoints, Job, nodes: a generateName may end in '-'."""
    if prefix and len(name) > 1 and name.endswith("-"):
        name = name[:-1] + "a"
    return is_dns1123_subdomain(name)


def name_is_dns_label(name: str, prefix: bool = False) -> list[str]:
    if prefix and len(name) > 1 and name.endswith("-"):
        name = name[:-1] + "a"
    return is_dns1123_label(name)


# ---------------------------------------------------------------------------------------
# Field-level causes
# ---------------------------------------------------------------------------------------


def invalid_no_value(field: str, detail: str) -> Cause:
    """field.Invalid(path, field.OmitValueType{}, detail): 'Invalid value: <detail>'."""
    return Cause(INVALID, field, detail)


def too_long(field: str, limit: int) -> Cause:
    return Cause(TOO_LONG, field, f"may not be more than {limit} bytes")


def not_found(field: str, value: Any) -> Cause:
    cause = Cause("FieldValueNotFound", field, "", value)
    cause["message"] = cause["message"].replace("FieldValueNotFound", "Not found", 1)
    return cause


def validate_each(messages: list[str], field: str, value: Any) -> list[Cause]:
    return [invalid(field, value, m) for m in messages]


def validate_dns1123_label(value: str, field: str) -> list[Cause]:
    return validate_each(is_dns1123_label(value), field, value)


def validate_qualified_name(value: str, field: str) -> list[Cause]:
    return validate_each(is_qualified_name(value), field, value)


def validate_nonnegative(value: Any, field: str) -> list[Cause]:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
        return [invalid(field, value, IS_NEGATIVE)]
    return []


def validate_labels(labels: dict | None, field: str) -> list[Cause]:
    """Every key a qualified name, every value a label value; kube reports on the map's path."""
    causes: list[Cause] = []
    for key, value in (labels or {}).items():
        causes += validate_qualified_name(key, field)
        causes += validate_each(is_valid_label_value(value if isinstance(value, str) else str(value)),
                                field, value)
    return causes


def validate_annotations(annotations: dict | None, field: str) -> list[Cause]:
    """Keys are qualified names (case-insensitive); keys + values at most 256 KiB in total."""
    causes: list[Cause] = []
    total = 0
    for key, value in (annotations or {}).items():
        causes += validate_each(is_qualified_name(key.lower()), field, key)
        total += len(key.encode()) + len(str(value).encode())
    if total > TOTAL_ANNOTATION_SIZE_LIMIT:
        causes.append(too_long(field, TOTAL_ANNOTATION_SIZE_LIMIT))
    return causes


def validate_immutable(new: Any, old: Any, field: str, definition: str | None = None) -> list[Cause]:
    if semantic_equal(new, old, definition):
        return []
    return [invalid(field, new, FIELD_IMMUTABLE)]


def validate_domain_prefixed_path(value: str, path: str) -> list[Cause]:
    """IsDomainPrefixedPath, e.g. "kueue.x-k8s.io/multikueue"."""
    if not value:
        return [required(path)]
    host, sep, rest = value.partition("/")
    if not sep or not host or not rest:
        return [invalid(path, value, 'must be a domain-prefixed path (such as "acme.io/foo")')]
    causes = validate_each(is_dns1123_subdomain(host), path, host)
    if not _full(_HTTP_PATH, rest):
        causes.append(invalid(path, rest, regex_error("Invalid path", _HTTP_PATH.pattern[1:-1])))
    return causes


# ---------------------------------------------------------------------------------------
# IP addresses
# ---------------------------------------------------------------------------------------

_IPV4_PART = re.compile(r"[0-9]{1,3}")


def parse_ip(value: Any) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """netutils.ParseIPSloppy: Go's net.ParseIP, but IPv4 parts may have leading zeros.

    IPv4-mapped IPv6 addresses come back as IPv4 (Go stores them so, and its IsLoopback and
    friends answer for the IPv4 address). Zones ("fe80::1%eth0") are not IPs here.
    """
    if not isinstance(value, str) or not value:
        return None
    if "." in value and ":" not in value:
        parts = value.split(".")
        if len(parts) != 4 or not all(_full(_IPV4_PART, p) for p in parts):
            return None
        numbers = [int(p) for p in parts]
        if any(n > 255 for n in numbers):
            return None
        return ipaddress.IPv4Address(".".join(map(str, numbers)))
    if "%" in value or not re.fullmatch(r"[0-9A-Fa-f:.]+", value):
        return None
    try:
        ip = ipaddress.IPv6Address(value)
    except ValueError:
        return None
    return ip.ipv4_mapped or ip


def is_valid_ip(value: Any) -> list[str]:
    if parse_ip(value) is None:
        return ["must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"]
    return []


def validate_ip(value: Any, field: str) -> list[Cause]:
    return validate_each(is_valid_ip(value), field, value)


def validate_non_special_ip(value: Any, field: str) -> list[Cause]:
    """ValidateNonSpecialIP: no unspecified, loopback, link-local or link-local multicast IP
    (an endpoint there is meaningless, or node-local, like a metadata service)."""
    ip = parse_ip(value)
    if ip is None:
        return [invalid(field, value, "must be a valid IP address")]
    causes = []
    if ip.is_unspecified:
        causes.append(invalid(field, value, f"may not be unspecified ({value})"))
    if ip.is_loopback:
        causes.append(invalid(field, value, "may not be in the loopback range (127.0.0.0/8, ::1/128)"))
    if _is_link_local_unicast(ip):
        causes.append(invalid(field, value, "may not be in the link-local range (169.254.0.0/16, fe80::/10)"))
    if _is_link_local_multicast(ip):
        causes.append(invalid(field, value,
                              "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)"))
    return causes


def _is_link_local_unicast(ip) -> bool:
    if ip.version == 4:
        return ip in ipaddress.IPv4Network("169.254.0.0/16")
    b = ip.packed
    return b[0] == 0xFE and (b[1] & 0xC0) == 0x80


def _is_link_local_multicast(ip) -> bool:
    if ip.version == 4:
        return ip in ipaddress.IPv4Network("224.0.0.0/24")
    b = ip.packed
    return b[0] == 0xFF and (b[1] & 0x0F) == 0x02   # any flags nibble, as Go checks


# ---------------------------------------------------------------------------------------
# ListOptions
# ---------------------------------------------------------------------------------------


def validate_list_options(resource_version: str, match: str, continue_token: str,
                          send_initial_events: bool | None = None) -> list[Cause]:
    """ValidateListOptions for a list (not a watch): every broken rule at once, on the raw
    query strings, before the resourceVersion or the continue token are parsed."""
    causes: list[Cause] = []
    if send_initial_events is not None:
        causes.append(forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"))
    if not match:
        return causes
    if not resource_version:
        causes.append(forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden unless resourceVersion is provided"))
    if continue_token:
        causes.append(forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided"))
    if match not in ("Exact", "NotOlderThan"):
        causes.append(not_supported("resourceVersionMatch", match, ["Exact", "NotOlderThan", ""]))
    if match == "Exact" and resource_version == "0":
        causes.append(forbidden("resourceVersionMatch", 'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'))
    return causes


# ---------------------------------------------------------------------------------------
# ObjectMeta
# ---------------------------------------------------------------------------------------

FINALIZER_ORPHAN = "orphan"
FINALIZER_FOREGROUND = "foregroundDeletion"


def validate_object_meta(meta: dict, namespaced: bool, path: str = "metadata",
                         name_fn: Callable[[str, bool], list[str]] = name_is_dns_subdomain) -> list[Cause]:
    """ValidateObjectMeta on create: names, namespace, labels, annotations, owners, finalizers."""
    causes: list[Cause] = []
    generate_name = meta.get("generateName") or ""
    name = meta.get("name") or ""
    if generate_name:
        causes += validate_each(name_fn(generate_name, True), f"{path}.generateName", generate_name)
    if not name:
        # The store names the object from generateName before this runs; a bare
        # generateName (validated alone) is accepted.
        if not generate_name:
            causes.append(required(f"{path}.name", "name or generateName is required"))
    else:
        causes += validate_each(name_fn(name, False), f"{path}.name", name)
    namespace = meta.get("namespace") or ""
    if namespaced:
        if not namespace:
            causes.append(required(f"{path}.namespace"))
        else:
            causes += validate_each(name_is_dns_label(namespace), f"{path}.namespace", namespace)
    elif namespace:
        causes.append(forbidden(f"{path}.namespace", "not allowed on this type"))
    causes += validate_nonnegative(meta.get("generation", 0), f"{path}.generation")
    causes += validate_labels(meta.get("labels"), f"{path}.labels")
    causes += validate_annotations(meta.get("annotations"), f"{path}.annotations")
    causes += validate_owner_references(meta.get("ownerReferences"), f"{path}.ownerReferences")
    causes += validate_finalizers(meta.get("finalizers"), f"{path}.finalizers")
    return causes


def validate_owner_references(refs: list | None, path: str) -> list[Cause]:
    causes: list[Cause] = []
    first_controller = ""
    for ref in refs or []:
        # kube reports these on the list's path, without an index.
        api_version, kind = ref.get("apiVersion") or "", ref.get("kind") or ""
        version = _version_of(api_version)
        if not version:
            causes.append(invalid(f"{path}.apiVersion", api_version, "version must not be empty"))
        if not kind:
            causes.append(invalid(f"{path}.kind", kind, "kind must not be empty"))
        if not ref.get("name"):
            causes.append(invalid(f"{path}.name", ref.get("name") or "", "name must not be empty"))
        if not ref.get("uid"):
            causes.append(invalid(f"{path}.uid", ref.get("uid") or "", "uid must not be empty"))
        if version == "v1" and api_version == "v1" and kind == "Event":
            causes.append(invalid(path, ref, "/v1, Kind=Event is disallowed from being an owner"))
        if ref.get("controller") is True:
            current = f"{kind}/{ref.get('name') or ''}"
            if first_controller:
                causes.append(invalid(path, refs, "Only one reference can have Controller set to true. "
                                      f'Found "true" in references for {first_controller} and {current}'))
            else:
                first_controller = current
    return causes


def _version_of(api_version: str) -> str:
    """schema.ParseGroupVersion's version part ("" when unparseable)."""
    if not api_version or api_version.count("/") > 1:
        return ""
    return api_version.split("/")[-1]


def validate_finalizers(finalizers: list | None, path: str) -> list[Cause]:
    causes: list[Cause] = []
    finalizers = finalizers or []
    for f in finalizers:
        causes += validate_qualified_name(f, path)
    if FINALIZER_ORPHAN in finalizers and FINALIZER_FOREGROUND in finalizers:
        causes.append(invalid(path, finalizers,
                              f"finalizer {FINALIZER_ORPHAN} and {FINALIZER_FOREGROUND} cannot be both set"))
    return causes


def validate_object_meta_update(new_meta: dict, old_meta: dict, path: str = "metadata") -> list[Cause]:
    """ValidateObjectMetaUpdate: identity and timestamps are immutable; a terminating object
    may lose finalizers but gain none. (resourceVersion and generation are the store's.)"""
    causes: list[Cause] = []
    if old_meta.get("deletionTimestamp"):
        added = sorted(set(new_meta.get("finalizers") or []) - set(old_meta.get("finalizers") or []))
        if added:
            causes.append(forbidden(f"{path}.finalizers",
                                    "no new finalizers can be added if the object is being deleted, "
                                    "found new finalizers []string{" + ", ".join(json.dumps(f) for f in added) + "}"))
    for key in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp",
                "deletionGracePeriodSeconds"):
        new_value, old_value = new_meta.get(key), old_meta.get(key)
        if new_value in (None, "") and old_value in (None, ""):
            continue   # unset either way (Go cannot tell "" from absent for these)
        if new_value != old_value:
            causes.append(invalid(f"{path}.{key}", new_value, FIELD_IMMUTABLE))
    causes += validate_labels(new_meta.get("labels"), f"{path}.labels")
    causes += validate_annotations(new_meta.get("annotations"), f"{path}.annotations")
    causes += validate_owner_references(new_meta.get("ownerReferences"), f"{path}.ownerReferences")
    return causes
