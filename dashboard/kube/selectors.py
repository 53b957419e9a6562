"""Kubernetes label and field selectors: parsing, matching, validation and ORM pushdown.

Behaviour follows k8s.io/apimachinery (labels.Parse, metav1.LabelSelectorAsSelector,
metav1 ValidateLabelSelector, fields.ParseSelector) including its error texts, so that
`kubectl get -l 'a in b'` against kubedash prints what it prints against a real cluster.
Key and value syntax are validation.py's rules, in apimachinery's exact wording.

Every parse error is raised as `errors.bad_request(...)` (400 BadRequest), as
kube-apiserver answers a bad `labelSelector` / `fieldSelector` query parameter.

This module imports no Django at module level; only `label_selector_q` /
`field_selector_q` touch `django.db.models`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from django.db.models import Q
from django.db.models.fields.json import KeyTextTransform
from django.db.models.lookups import Exact, In

from . import errors
from .errors import Cause, forbidden, invalid, required
from .validation import (is_qualified_name, is_valid_label_value, validate_each, validate_labels,
                         validate_qualified_name)

# ---------------------------------------------------------------------------------------
# Error texts
# ---------------------------------------------------------------------------------------

def go_quote(s: str) -> str:
    """Go's %q for a string (strconv.Quote), used inside kube error texts."""
    out = ['"']
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch in "\a\b\f\n\r\t\v":
            out.append({"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r",
                        "\t": "\\t", "\v": "\\v"}[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


def _go_value(value: Any) -> str:
    """How field.Error renders a bad value: %q for strings, JSON for lists (nil -> null)."""
    if isinstance(value, str):
        return go_quote(value)
    if value is None or value == []:
        # Go: append([]string(nil), ...) of nothing stays nil and marshals as null.
        return "null"
    return "[" + ",".join(go_quote(v) for v in value) + "]"


def _field_invalid(path: str, value: Any, detail: str) -> str:
    return f"{path}: Invalid value: {_go_value(value)}: {detail}"


def _aggregate(msgs: list[str]) -> str | None:
    """utilerrors.NewAggregate(...).Error(): one message as is, several as "[a, b]"."""
    seen: list[str] = []
    for m in msgs:
        if m not in seen:
            seen.append(m)
    if not seen:
        return None
    return seen[0] if len(seen) == 1 else "[" + ", ".join(seen) + "]"


# ---------------------------------------------------------------------------------------
# Label selectors
# ---------------------------------------------------------------------------------------

# Operators, spelled as apimachinery's selection.Operator values.
EXISTS, DOES_NOT_EXIST = "exists", "!"
EQUALS, DOUBLE_EQUALS, NOT_EQUALS = "=", "==", "!="
IN, NOT_IN, GT, LT = "in", "notin", "gt", "lt"
_BINARY_OPERATORS = "in, notin, =, ==, !=, gt, lt"
_INT64 = re.compile(r"^[+-]?[0-9]+$")


def _parse_int64(text: str) -> int | None:
    # strconv.ParseInt(s, 10, 64): optional sign, decimal digits, in range.
    if not _INT64.match(text):
        return None
    n = int(text)
    return n if -(2 ** 63) <= n < 2 ** 63 else None


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op, has = self.operator, self.key in labels
        if op in (IN, EQUALS, DOUBLE_EQUALS):
            return has and labels[self.key] in self.values
        if op in (NOT_IN, NOT_EQUALS):
            return not has or labels[self.key] not in self.values
        if op == EXISTS:
            return has
        if op == DOES_NOT_EXIST:
            return not has
        if op in (GT, LT):
            if not has or len(self.values) != 1:
                return False
            have, want = _parse_int64(labels[self.key]), _parse_int64(self.values[0])
            if have is None or want is None:
                return False
            return have > want if op == GT else have < want
        return False

    def __str__(self) -> str:
        if self.operator == EXISTS:
            return self.key
        if self.operator == DOES_NOT_EXIST:
            return "!" + self.key
        # Canonical form sorts set values, like Requirement.String().
        values = ",".join(sorted(self.values))
        if self.operator in (IN, NOT_IN):
            return f"{self.key} {self.operator} ({values})"
        sym = {GT: ">", LT: "<"}.get(self.operator, self.operator)
        return f"{self.key}{sym}{values}"


def new_requirement(key: str, operator: str, values: Iterable[str] | None) -> Requirement:
    """labels.NewRequirement: validate and build, raising 400 with apimachinery's text."""
    vals = None if values is None else list(values)
    errs: list[str] = []
    key_errs = is_qualified_name(key, go_spacing=True)
    if key_errs:
        errs.append(_field_invalid("key", key, "; ".join(key_errs)))
    n = len(vals or [])
    if operator in (IN, NOT_IN):
        if n == 0:
            errs.append(_field_invalid("values", vals,
                                       "for 'in', 'notin' operators, values set can't be empty"))
    elif operator in (EQUALS, DOUBLE_EQUALS, NOT_EQUALS):
        if n != 1:
            errs.append(_field_invalid("values", vals,
                                       "exact-match compatibility requires one single value"))
    elif operator in (EXISTS, DOES_NOT_EXIST):
        if n != 0:
            errs.append(_field_invalid("values", vals,
                                       "values set must be empty for exists and does not exist"))
    elif operator in (GT, LT):
        if n != 1:
            errs.append(_field_invalid("values", vals,
                                       "for 'Gt', 'Lt' operators, exactly one value is required"))
        for i, v in enumerate(vals or []):
            if _parse_int64(v) is None:
                errs.append(_field_invalid(f"values[{i}]", v,
                                           "for 'Gt', 'Lt' operators, the value must be an integer"))
    else:
        supported = ", ".join(go_quote(o) for o in
                              (IN, NOT_IN, EQUALS, DOUBLE_EQUALS, NOT_EQUALS, GT, LT, EXISTS, DOES_NOT_EXIST))
        errs.append(f"operator: Unsupported value: {go_quote(operator)}: supported values: {supported}")
    for i, v in enumerate(vals or []):
        v_errs = is_valid_label_value(v, go_spacing=True)
        if v_errs:
            errs.append(_field_invalid(f"values[{i}][{key}]", v, "; ".join(v_errs)))
    msg = _aggregate(errs)
    if msg:
        raise errors.bad_request(msg)
    return Requirement(key, operator, tuple(vals or ()))


class LabelSelector:
    """An AND of requirements. `LabelSelector.nothing()` matches no object at all (a null
    metav1.LabelSelector); an empty selector matches everything."""

    __slots__ = ("requirements", "_nothing")

    def __init__(self, requirements: Iterable[Requirement] = (), *, nothing: bool = False):
        # Sorted by key (stable), as selector.Add / parse do, for a deterministic String().
        self.requirements: tuple[Requirement, ...] = tuple(sorted(requirements, key=lambda r: r.key))
        self._nothing = nothing

    @classmethod
    def everything(cls) -> "LabelSelector":
        return cls()

    @classmethod
    def nothing(cls) -> "LabelSelector":
        return cls(nothing=True)

    @property
    def matches_nothing(self) -> bool:
        return self._nothing

    @property
    def empty(self) -> bool:
        """True when the selector does not restrict anything (Selector.Empty())."""
        return not self._nothing and not self.requirements

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        if self._nothing:
            return False
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    def requires_exact_match(self, key: str) -> str | None:
        """The single value `key` must have (from =, ==, or a one-value in), else None."""
        for r in self.requirements:
            if r.key == key:
                if r.operator in (EQUALS, DOUBLE_EQUALS, IN) and len(r.values) == 1:
                    return r.values[0]
                return None
        return None

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)

    def __repr__(self) -> str:
        return "LabelSelector(<nothing>)" if self._nothing else f"LabelSelector({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, LabelSelector) and self._nothing == other._nothing
                and self.requirements == other.requirements)

    def __hash__(self) -> int:
        return hash((self._nothing, self.requirements))


# --- the label selector grammar ---------------------------------------------------------
#   selector    ::= requirement ("," requirement)*
#   requirement ::= ["!"] KEY [ ("in"|"notin") "(" values ")" | ("="|"=="|"!="|">"|"<") VALUE ]
# Tokens: identifiers run until whitespace or one of = ! ( ) , < >; "in"/"notin" are
# keywords only where an operator is expected.

_SPECIAL = frozenset("=!(),<>")
_SPACE = frozenset(" \t\r\n")
_END, _ID = "end", "id"


class _SyntaxError(Exception):
    pass


def _tokens(text: str) -> list[tuple[str, str]]:
    # A NUL ends the input, as it does for the Go lexer that reads a 0 byte as "end".
    text = text.split("\x00", 1)[0]
    out, i, n = [], 0, len(text)
    while True:
        while i < n and text[i] in _SPACE:
            i += 1
        if i >= n:
            out.append((_END, ""))
            return out
        if text[i] in _SPECIAL:
            two = text[i:i + 2]
            sym = two if two in ("!=", "==") else text[i]
            out.append((sym, sym))
            i += len(sym)
            continue
        j = i
        while j < n and text[j] not in _SPECIAL and text[j] not in _SPACE:
            j += 1
        word = text[i:j]
        out.append((word if word in (IN, NOT_IN) else _ID, word))
        i = j


class _Parser:
    def __init__(self, text: str):
        self.items = _tokens(text)
        self.pos = 0

    def peek(self, values: bool = True) -> tuple[str, str]:
        return self._as(self.items[self.pos], values)

    def take(self, values: bool = True) -> tuple[str, str]:
        item = self.items[self.pos]
        if item[0] != _END:
            self.pos += 1
        return self._as(item, values)

    @staticmethod
    def _as(item: tuple[str, str], values: bool) -> tuple[str, str]:
        # Where values (or keys) are expected, "in"/"notin" are ordinary identifiers.
        kind, lit = item
        if values and kind in (IN, NOT_IN):
            return _ID, lit
        return kind, lit

    def selector(self) -> list[Requirement]:
        reqs: list[Requirement] = []
        while True:
            kind, lit = self.peek()
            if kind == _END:
                return reqs
            if kind not in (_ID, "!"):
                raise _top(f"found '{lit}', expected: !, identifier, or 'end of string'")
            try:
                reqs.append(self.requirement())
            except _SyntaxError as e:
                raise _top(f"unable to parse requirement: {e}") from None
            except errors.ApiError as e:
                raise _top(f"unable to parse requirement: {e.message}") from None
            kind, lit = self.take()
            if kind == _END:
                return reqs
            if kind != ",":
                raise _top(f"found '{lit}', expected: ',' or 'end of string'")
            kind, lit = self.peek()
            if kind not in (_ID, "!"):
                raise _top(f"found '{lit}', expected: identifier after ','")

    def requirement(self) -> Requirement:
        kind, key = self.take()
        negated = kind == "!"
        if negated:
            kind, key = self.take()
        if kind != _ID:
            raise _SyntaxError(f"found '{key}', expected: identifier")
        key_errs = is_qualified_name(key, go_spacing=True)
        if key_errs:
            # labels.Parse runs with a nil field path, which Go prints as "<nil>".
            raise _SyntaxError(_field_invalid("<nil>", key, "; ".join(key_errs)))
        if negated:
            # "!key" takes no operator; anything after it is the caller's problem.
            return new_requirement(key, DOES_NOT_EXIST, [])
        if self.peek()[0] in (_END, ","):
            return new_requirement(key, EXISTS, [])
        op = self.operator()
        if op in (IN, NOT_IN):
            values = sorted(self.value_set())
        else:
            values = [self.exact_value()]
        return new_requirement(key, op, values)

    def operator(self) -> str:
        kind, lit = self.take(values=False)
        op = {IN: IN, NOT_IN: NOT_IN, "=": EQUALS, "==": DOUBLE_EQUALS, "!=": NOT_EQUALS,
              ">": GT, "<": LT}.get(kind)
        if op is None:
            raise _SyntaxError(f"found '{lit}', expected: {_BINARY_OPERATORS}")
        return op

    def value_set(self) -> set[str]:
        kind, lit = self.take()
        if kind != "(":
            raise _SyntaxError(f"found '{lit}' expected: '('")
        kind, lit = self.peek()
        if kind == ")":          # "()" is the set holding the empty string
            self.take()
            return {""}
        if kind not in (_ID, ","):
            raise _SyntaxError(f"found '{lit}', expected: ',', ')' or identifier")
        values: set[str] = set()
        while True:
            kind, lit = self.take()
            if kind == _ID:
                values.add(lit)
                nkind, nlit = self.peek()
                if nkind == ")":
                    self.take()
                    return values
                if nkind != ",":
                    raise _SyntaxError(f"found '{nlit}', expected: ',' or ')'")
            elif kind == ",":
                # Empty members: "(,a)", "(a,)" and "(a,,b)" all add "".
                if not values:
                    values.add("")
                nkind, _ = self.peek()
                if nkind == ")":
                    values.add("")
                    self.take()
                    return values
                if nkind == ",":
                    self.take()
                    values.add("")
            else:
                raise _SyntaxError(f"found '{lit}', expected: ',', or identifier")

    def exact_value(self) -> str:
        if self.peek()[0] in (_END, ","):
            return ""           # "a=" selects the empty value
        kind, lit = self.take()
        if kind != _ID:
            raise _SyntaxError(f"found '{lit}', expected: identifier")
        return lit


def _top(msg: str) -> errors.ApiError:
    return errors.bad_request(msg)


def parse_label_selector(text: str | None) -> LabelSelector:
    """Parse a `labelSelector` query value; raise 400 BadRequest on bad syntax."""
    if not text:
        return LabelSelector.everything()
    return LabelSelector(_Parser(text).selector())


_DICT_OPERATORS = {"In": IN, "NotIn": NOT_IN, "Exists": EXISTS, "DoesNotExist": DOES_NOT_EXIST}


def label_selector_from_dict(sel: Mapping[str, Any] | None, *, validate: bool = True) -> LabelSelector:
    """metav1.LabelSelectorAsSelector: None matches nothing, {} matches everything.
    validate=False skips the key and value checks, for selectors read back from stored
    objects (validated when written)."""
    if sel is None:
        return LabelSelector.nothing()
    build = new_requirement if validate else _unchecked_requirement
    match_labels = sel.get("matchLabels") or {}
    exprs = sel.get("matchExpressions") or []
    reqs = [build(k, EQUALS, [v]) for k, v in match_labels.items()]
    for expr in exprs:
        op = _DICT_OPERATORS.get(expr.get("operator"))
        if op is None:
            raise errors.bad_request(
                f"{go_quote(str(expr.get('operator') or ''))} is not a valid label selector operator")
        reqs.append(build(expr.get("key") or "", op, expr.get("values") or None))
    return LabelSelector(reqs)


def _unchecked_requirement(key: str, operator: str, values: Iterable[str] | None) -> Requirement:
    return Requirement(key, operator, tuple(values or ()))


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str] | None) -> bool | None:
    """Does the selector select these labels? None when the selector cannot be converted
    (kube then skips checks that need it; validate_label_selector reports why).
    A missing selector selects nothing; an empty one selects everything."""
    try:
        return label_selector_from_dict(selector).matches(labels)
    except errors.ApiError:
        return None


def format_label_selector(selector: Mapping[str, Any] | None) -> str:
    """metav1.FormatLabelSelector of a stored object's selector: requirements sorted by key,
    "<none>" when empty. Stored selectors passed validation on write, so the key and value
    checks are skipped (they were a third of a 3,000-Job Table's build time)."""
    if selector is None:
        return "<none>"
    try:
        return str(label_selector_from_dict(selector, validate=False)) or "<none>"
    except errors.ApiError:
        return "<error>"


def validate_label_selector(selector: dict | None, field: str) -> list[Cause]:
    """ValidateLabelSelector: a metav1.LabelSelector inside an object, as field causes."""
    if selector is None:
        return []
    causes = validate_labels(selector.get("matchLabels"), f"{field}.matchLabels")
    for i, expr in enumerate(selector.get("matchExpressions") or []):
        path = f"{field}.matchExpressions[{i}]"
        op, values = expr.get("operator", ""), expr.get("values") or []
        if op in ("In", "NotIn"):
            if not values:
                causes.append(required(f"{path}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
        elif op in ("Exists", "DoesNotExist"):
            if values:
                causes.append(forbidden(f"{path}.values",
                                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
        else:
            causes.append(invalid(f"{path}.operator", op, "not a valid selector operator"))
        causes += validate_qualified_name(expr.get("key", ""), f"{path}.key")
        for j, v in enumerate(values):
            causes += validate_each(is_valid_label_value(v), f"{path}.values[{j}]", v)
    return causes


# ---------------------------------------------------------------------------------------
# Field selectors
# ---------------------------------------------------------------------------------------

DEFAULT_FIELDS = frozenset({"metadata.name", "metadata.namespace"})
_TERM_OPERATORS = ("!=", "==", "=")   # "==" before "=" so no "=" is left on the value


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    operator: str      # "=" (also for "==") or "!="
    value: str

    def matches(self, getter: Callable[[str], str]) -> bool:
        have = getter(self.field)
        return have == self.value if self.operator == "=" else have != self.value

    def __str__(self) -> str:
        return f"{self.field}{self.operator}{escape_field_value(self.value)}"


class FieldSelector:
    __slots__ = ("requirements",)

    def __init__(self, requirements: Iterable[FieldRequirement] = ()):
        self.requirements: tuple[FieldRequirement, ...] = tuple(requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements

    def matches(self, getter: Callable[[str], str]) -> bool:
        """getter(field) -> the object's value for that field, as a string ("" if unset)."""
        return all(r.matches(getter) for r in self.requirements)

    def requires_exact_match(self, field: str) -> str | None:
        for r in self.requirements:
            if r.field == field and r.operator == "=":
                return r.value
        return None

    def exact(self, field: str) -> list[str] | None:
        """Values `field` is required to equal (every "=" term on it), or None if no such
        term. For pushdown as `field IN values`: a superset, since several different values
        can never all match; the caller still runs matches()."""
        values = [r.value for r in self.requirements if r.field == field and r.operator == "="]
        return values or None

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)

    def __repr__(self) -> str:
        return f"FieldSelector({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FieldSelector) and self.requirements == other.requirements

    def __hash__(self) -> int:
        return hash(self.requirements)


def escape_field_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def _unescape_field_value(value: str) -> str:
    out, pending = [], False
    for ch in value:
        if pending:
            if ch not in "\\,=":
                raise errors.bad_request(f"invalid field selector: invalid escape sequence: \\{ch}")
            out.append(ch)
            pending = False
        elif ch == "\\":
            pending = True
        elif ch in ",=":
            # Go prints the rune with %v, i.e. as its code point number.
            raise errors.bad_request(f"invalid field selector: unescaped character in value: {ord(ch)}")
        else:
            out.append(ch)
    if pending:
        raise errors.bad_request("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def _split_terms(text: str) -> list[str]:
    terms, start, pending = [], 0, False
    for i, ch in enumerate(text):
        if pending:
            pending = False
        elif ch == "\\":
            pending = True
        elif ch == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    # The first operator occurrence splits: field names cannot be escaped.
    for i in range(len(term)):
        for op in _TERM_OPERATORS:
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op):]
    return None


def unsupported_field_message(field: str, allowed: Iterable[str], kind: str = "") -> str:
    """kube-apiserver's text for a field label the kind cannot select on.

    Kinds with no own field-label conversion (Lease, Endpoints) get the scheme default;
    kinds with one (Job: status.successful) get their own wording.
    """
    if set(allowed) <= DEFAULT_FIELDS:
        return (f"{go_quote(field)} is not a known field selector: only "
                f'"metadata.name", "metadata.namespace"')
    if kind:
        return f"field label {go_quote(field)} not supported for {kind}"
    return f"field label not supported: {field}"


def parse_field_selector(text: str | None, allowed: Iterable[str] = DEFAULT_FIELDS,
                         kind: str = "") -> FieldSelector:
    """Parse a `fieldSelector` query value (fields.ParseSelector) and check each field.

    `allowed` is the set of selectable field paths for the kind (metadata.name and
    metadata.namespace plus Resource.field_getters); `kind` only shapes the error text.
    Terms are kept sorted, as apimachinery sorts them.
    """
    if not text:
        return FieldSelector()
    allowed = set(allowed)
    reqs: list[FieldRequirement] = []
    for part in sorted(_split_terms(text)):
        if not part:
            continue
        split = _split_term(part)
        if split is None:
            raise errors.bad_request(f"invalid selector: '{text}'; can't understand '{part}'")
        field, op, raw = split
        reqs.append(FieldRequirement(field, "!=" if op == "!=" else "=", _unescape_field_value(raw)))
    for r in reqs:   # the field-label check runs after the whole string parsed
        if r.field not in allowed:
            raise errors.bad_request(unsupported_field_message(r.field, allowed, kind))
    return FieldSelector(reqs)


def field_getter(obj: Mapping[str, Any],
                 extra: Mapping[str, Callable[[dict], str]] | None = None) -> Callable[[str], str]:
    """A getter for FieldSelector.matches over an object dict: metadata.name/namespace plus
    a Resource's field_getters."""
    meta = obj.get("metadata") or {}

    def get(field: str) -> str:
        if field == "metadata.name":
            return meta.get("name") or ""
        if field == "metadata.namespace":
            return meta.get("namespace") or ""
        if extra and field in extra:
            return extra[field](obj)  # type: ignore[arg-type]
        return ""
    return get


# ---------------------------------------------------------------------------------------
# ORM pushdown
# ---------------------------------------------------------------------------------------

def label_selector_q(sel: LabelSelector, field: str = "labels"):
    """A Django Q narrowing rows by `sel` on the JSONField `field` (SQLite and PostgreSQL).

    Contract: the Q is a SUPERSET filter. Only the positive requirements are pushed down
    (=, ==, in, exists); !=, notin, !key, gt and lt are left out, because a missing key or a
    NULL labels column makes SQL three-valued logic disagree with kube's rules. The caller
    MUST still run `sel.matches(labels)` on every row it returns.

    Keys may contain "." and "/", which Django's `labels__<key>` lookup syntax cannot
    express; KeyTextTransform takes the key verbatim and quotes it into the JSON path
    (SQLite) or binds it as a parameter (PostgreSQL `->>`), and `has_key` likewise.
    """
    if sel.matches_nothing:
        return Q(pk__in=[])
    q = Q()
    for r in sel.requirements:
        if r.operator == EXISTS:
            q &= Q(**{f"{field}__has_key": r.key})
        elif r.operator in (EQUALS, DOUBLE_EQUALS) or (r.operator == IN and len(r.values) == 1):
            q &= Q(Exact(KeyTextTransform(r.key, field), r.values[0]))
        elif r.operator == IN:
            q &= Q(In(KeyTextTransform(r.key, field), list(r.values)))
    return q


def field_selector_q(sel: FieldSelector, columns: Mapping[str, str]):
    """A Django Q for the terms whose field maps to a plain, non-null model column
    (e.g. {"metadata.name": "name", "metadata.namespace": "namespace"}). Exact for those
    terms; other terms are left to `sel.matches(...)` in Python (superset contract)."""
    q = Q()
    for r in sel.requirements:
        column = columns.get(r.field)
        if column is None:
            continue
        q &= Q(**{column: r.value}) if r.operator == "=" else ~Q(**{column: r.value})
    return q
