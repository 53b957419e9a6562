"""The YAML editor's form: the whole object as text, parsed with the API's own YAML loader
(kube.codec.load_yaml), its API errors listed under the one field."""
from __future__ import annotations

import re

from django import forms
from django.core.exceptions import ValidationError

from dashboard.kube import codec

from .api_errors import decode_error_field, field_manager_conflicts, plain

LIMITS_HIT = "limits_hit"   # the code of a ValidationError refusing text over a decoding limit (codec.OverLimit)


def load_yaml(text: str) -> dict:
    """Parse the editor's text; ValidationError (with line and column, and the line in its
    params) when it is not YAML or not a mapping (its code LIMITS_HIT when the text met a
    decoding limit)."""
    try:
        obj = codec.load_yaml(text)
    except codec.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"Line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ValidationError(f"{where}this is not valid YAML ({problem}).",
                              code=LIMITS_HIT if isinstance(exc, codec.OverLimit) else None,
                              params={"line": mark.line + 1} if mark else None)
    if not isinstance(obj, dict):
        raise ValidationError("The YAML must be one object (a mapping with apiVersion, kind, metadata …).")
    return obj


def note_limits_hit(form: forms.Form, ctx) -> None:
    """Mark the request's context (kube/context.py) when `form` refused text over a decoding
    limit: the server answers it slowly (server/tarpit.py), as the API's refusal of that body."""
    if any(error.code == LIMITS_HIT for errors in form.errors.as_data().values() for error in errors):
        ctx.limits_hit = True


class YamlForm(forms.Form):
    yaml = forms.CharField(required=False, label="Object (YAML)", strip=False,
                           help_text="The whole object, as kubectl edit shows it. Unknown fields are an error.",
                           widget=forms.Textarea(attrs={"rows": 20, "spellcheck": "false", "class": "mono yaml-input",
                                                        "data-editor": "yaml",   # static_src/editor
                                                        "autocapitalize": "off", "autocomplete": "off",
                                                        "wrap": "off"}))

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        source = self.data if self.is_bound else self.initial
        lines = len(str(source.get("yaml") or "").splitlines())
        self.fields["yaml"].widget.attrs["rows"] = max(12, min(lines + 2, 40))

    def clean_yaml(self):
        try:
            self.parsed = load_yaml(self.cleaned_data.get("yaml", ""))
        except ValidationError as exc:
            self.mark_lines([(exc.params or {}).get("line")])
            raise
        return self.cleaned_data["yaml"]

    def mark_lines(self, lines) -> None:
        """The lines errors point at, for the editor to mark (static_src/editor: data-error-lines)."""
        attrs = self.fields["yaml"].widget.attrs
        known = [int(n) for n in (attrs.get("data-error-lines") or "").split()]
        marked = sorted(set(known) | {n for n in lines if n})
        if marked:
            attrs["data-error-lines"] = " ".join(map(str, marked))

    def add_api_error(self, err) -> None:
        """Everything is one field here: causes are listed under it, with their paths, each
        starting with the line of the text it is about (marked in the editor)."""
        causes = (err.details or {}).get("causes") or []
        detail = getattr(err, "detail", "") or ""
        unknown = re.findall(r'unknown field "([^"]+)"', detail)
        located = decode_error_field(detail)
        if field_manager_conflicts(err):
            self.add_error("yaml", field_manager_conflicts(err))
        elif err.code == 422 and causes:
            self.add_error("yaml", [self._at(c.get("field"), plain(c.get("message", ""))) for c in causes])
        elif unknown:
            self.add_error("yaml", [self._at(path, "unknown field (check its spelling and indentation).")
                                    for path in unknown])
        elif located:
            self.add_error("yaml", self._at(located[0], located[1]))
        else:
            self.add_error("yaml", err.message)

    def _at(self, path: str | None, message: str) -> str:
        """"Line 7: spec.x: message" (the line of path in the text, or its nearest parent's)."""
        if not path:
            return message
        if not hasattr(self, "_lines"):
            self._lines = codec.yaml_lines(str(self.data.get("yaml") or "")) if self.is_bound else {}
        line = line_of(self._lines, path)
        self.mark_lines([line])
        return (f"Line {line}: " if line else "") + f"{path}: {message}"


def line_of(lines: dict[str, int], path: str) -> int | None:
    """The line of an API field path in codec.yaml_lines' map: its own, else its nearest parent's
    ("metadata.labels[app]" is "metadata.labels.app"; "spec.template.labels" that of spec.template)."""
    path = re.sub(r"\[([^\]]*[^\]\d][^\]]*)\]", r".\1", path)     # map keys, not list indexes
    while path:
        if path in lines:
            return lines[path]
        cut = max(path.rfind("."), path.rfind("["))
        if cut <= 0:
            return None
        path = path[:cut]
    return None
