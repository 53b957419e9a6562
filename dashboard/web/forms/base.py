"""The generic form behind every kind's form (ObjectForm), and the helpers kind forms use.

A form only translates between what a person types and the object. Every rule lives in the
API strategies: a save builds the object, decodes it with kube.codec.decode_object (Strict)
and goes through the store, exactly like an API request. So a form accepts what the API
accepts and nothing else, and the API's 422 causes are mapped back to the fields (and lines)
that produced them, in plain words.

One generic mechanism (ObjectForm) with small per-kind declarations (in each kind app's
web.py): the fields, how an object fills them (data_from_object), how they change an object
(apply), and which API paths belong to which field (CAUSES).
"""
from __future__ import annotations

import re
from typing import Any

from django import forms

from dashboard.kube.errors import ApiError
from dashboard.kube.schema import DecodeError

from .api_errors import decode_error_field, field_manager_conflicts, plain
from .parsers import format_address, format_labels, format_port, parse_labels


def put(target: dict, key: str, value: Any) -> None:
    """Set a field, or drop it when the form left it empty (None / "")."""
    if value is None or value == "" or value == {} or value == []:
        if target.get(key) == "" and value == "":
            return  # an explicitly empty string stays as it was
        target.pop(key, None)
    else:
        target[key] = value


def field_text(value: Any) -> str:
    return "" if value is None else str(value)


class ObjectForm(forms.Form):
    """Common fields (name, namespace, labels) and the cause -> field mapping.

    Subclasses declare KIND, their own fields, CAUSES (API path prefix -> field name; a
    prefix ending in "[" takes a list index that becomes a line number) and implement
    data_from_object() and apply().
    """

    KIND = ""
    # A button that adds a repeated section: {"action", "label", "help"} (the form's
    # restructure(data, action) answers it, as it answers a section's "remove" button).
    ADD_SECTION: dict[str, str] | None = None
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
        put(meta, "labels", self.cleaned_data.get("labels"))
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

    @classmethod
    def readonly_section(cls, obj: dict) -> dict | None:
        """What an edit form shows but does not offer (it cannot change), or None:
        {"legend", "help", "facts": [(label, value)]} (templates/web/edit/form.html)."""
        return None

    @classmethod
    def group_value(cls, values: dict, names: tuple[str, ...]) -> Any:
        """The value a conflict page compares for one comparable(): a field's value, or for a
        group of fields the (name, value) pairs that are filled in."""
        if len(names) == 1:
            return values.get(names[0])
        return [(n, values.get(n)) for n in names if values.get(n)]

    @classmethod
    def group_display(cls, values: dict, names: tuple[str, ...]) -> str:
        """group_value() as the conflict page shows it."""
        if len(names) == 1:
            return cls.display(values.get(names[0]))
        lines = [f"{cls.part_label(n)}: " + ", ".join(item_text(v) for v in items)
                 for n, items in cls.group_value(values, names)]
        return "\n".join(lines) or "(none)"

    @classmethod
    def part_label(cls, name: str) -> str:
        """A field's name within a group, on the conflict page."""
        field = cls.base_fields.get(name)
        return (field.label if field is not None else "") or name

    @staticmethod
    def display(value: Any) -> str:
        if value is None or value == "":
            return "(not set)"
        if isinstance(value, bool):
            return "yes" if value else "no"
        if isinstance(value, dict):
            return format_labels(value) or "(none)"
        if isinstance(value, (list, tuple)):
            return "\n".join(ObjectForm.display(v) if isinstance(v, (list, tuple)) else item_text(v)
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
        details = err.details or {}
        causes = details.get("causes") or []
        if err.code == 422 and causes:
            found: list[tuple[str | None, str]] = []
            for cause in self._without_derived(causes):
                path = cause.get("field") or ""
                field, hint = self.locate(path)
                if cause.get("derived"):
                    field, hint = "name", ""
                # Which value, when the field holds several and no line number says it.
                several = field in self.fields and isinstance(self.fields[field].widget, forms.Textarea)
                text = plain(cause.get("message", ""), keep_value=several and not hint)
                if cause.get("derived"):
                    text = f"{text.rstrip('.')}: the name is also the value of a label made from it."
                found.append((field, hint + text) if field else (None, f"{path}: {text}" if path else text))
            for field, message in _distinct(found):
                self.add_error(field, message)
            return
        if field_manager_conflicts(err):   # server-side apply: who owns the fields, in words
            for text in field_manager_conflicts(err):
                self.add_error(None, text)
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

    def add_api_errors_too(self, attempt) -> None:
        """After the form's own checks failed, put what did parse through the API as well (a
        dry run, attempt()), so that one submit reports every problem rather than one layer
        at a time. A field that already has an error keeps just that one."""
        try:
            attempt()
        except ApiError as err:
            if err.code == 409:
                return   # a stale form: the save says so, once the fields are right
            had = set(self.errors)
            add_error = self.add_error
            self.add_error = lambda field, error: None if field in had else add_error(field, error)
            try:
                self.add_api_error(err)
            finally:
                del self.add_error
        except (KeyError, TypeError, ValueError):
            pass   # what parsed is not enough to build an object: the form's errors stand

    def _without_derived(self, causes: list[dict]) -> list[dict]:
        """Labels the API generates from the name carry it (a Job's job-name labels on its pod
        template, spec.template.labels): an invalid name is reported again as an invalid label
        the user never typed. When the name is reported, drop those; when it is not (a valid
        name too long for a label value), they are about the name: marked "derived", for it."""
        name = (self.cleaned_data or {}).get("name") or ""
        if not name or "name" not in self.fields:
            return causes
        typed = self.data.get("labels", "") if self.is_bound else ""
        named = any(self.locate(c.get("field") or "")[0] == "name" for c in causes)
        out = []
        for cause in causes:
            if "labels" in (cause.get("field") or "") and f'"{name}"' in cause.get("message", "") \
                    and name not in typed:
                if not named:
                    out.append({**cause, "derived": True})
                continue
            out.append(cause)
        return out

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


def item_text(value: Any) -> str:
    if isinstance(value, dict):
        if "ip" in value:
            return format_address(value)
        if "port" in value:
            return format_port(value)
        if "name" in value and "value" in value:
            return f"{value['name']}={value['value']}"
    return str(value)


def line_list_field(label: str, help_text: str, rows: int = 3) -> forms.CharField:
    return forms.CharField(required=False, label=label, help_text=help_text,
                           widget=forms.Textarea(attrs={"rows": rows, "spellcheck": "false", "class": "mono"}))


def time_field(label: str, help_text: str) -> forms.CharField:
    return forms.CharField(required=False, label=label, help_text=help_text,
                           widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false",
                                                         "class": "mono", "placeholder": "2025-01-02T03:04:05Z"}))


INT32_MAX, INT64_MAX = 2 ** 31 - 1, 2 ** 63 - 1   # the API's int32 / int64 fields


def count_field(label: str, help_text: str, minimum: int, maximum: int = INT32_MAX) -> forms.IntegerField:
    """A whole number within the range the kind's validation and the field's type allow: said in
    the help text and the widget (min, max), and checked by the form, so that a number the API
    could not even decode is an error on its field, in the same round as the API's others."""
    said = f"From {minimum} to {maximum}."
    return forms.IntegerField(required=False, label=label, min_value=minimum, max_value=maximum,
                              help_text=f"{help_text} {said}".strip(),
                              error_messages={"min_value": f"Must be {said[0].lower()}{said[1:]}",
                                              "max_value": f"Must be {said[0].lower()}{said[1:]}"})

