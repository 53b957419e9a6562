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
    """Parse the editor's text; ValidationError (with line and column) when it is not YAML or
    not a mapping (its code LIMITS_HIT when the text met a decoding limit)."""
    try:
        obj = codec.load_yaml(text)
    except codec.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"Line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ValidationError(f"{where}this is not valid YAML ({problem}).",
                              code=LIMITS_HIT if isinstance(exc, codec.OverLimit) else None)
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
        self.parsed = load_yaml(self.cleaned_data.get("yaml", ""))
        return self.cleaned_data["yaml"]

    def add_api_error(self, err) -> None:
        """Everything is one field here: causes are listed under it, with their paths."""
        causes = (err.details or {}).get("causes") or []
        detail = getattr(err, "detail", "") or ""
        unknown = re.findall(r'unknown field "([^"]+)"', detail)
        located = decode_error_field(detail)
        if field_manager_conflicts(err):
            self.add_error("yaml", field_manager_conflicts(err))
        elif err.code == 422 and causes:
            self.add_error("yaml", [f"{c.get('field')}: {plain(c.get('message', ''))}" if c.get("field")
                                    else plain(c.get("message", "")) for c in causes])
        elif unknown:
            self.add_error("yaml", [f"{path}: unknown field (check its spelling and indentation)."
                                    for path in unknown])
        elif located:
            self.add_error("yaml", f"{located[0]}: {located[1]}")
        else:
            self.add_error("yaml", err.message)
