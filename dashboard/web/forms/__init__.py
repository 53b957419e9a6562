"""The write pages' forms: the generic ObjectForm each kind's form builds on (base), the text
parsers (parsers), API errors in plain words (api_errors), the conflict view (conflict) and the
YAML editor (editor). The kinds' own forms live in their apps' web.py."""
from django.core.exceptions import ValidationError

from .api_errors import decode_error_field, plain
from .base import INT32_MAX, INT64_MAX, ObjectForm, count_field, item_text, line_list_field, put, field_text, time_field
from .conflict import (LOADED, conflict_view, flatten, form_changes, loaded_text, merge_diff, posted_loaded, reapply_yaml,
                       yaml_changes, yaml_rows)
from .editor import LIMITS_HIT, YamlForm, load_yaml, note_limits_hit
from .parsers import (format_address, format_env, format_labels, format_port, numbered_lines, parse_address_line,
                      parse_env, parse_labels, parse_port_line, parse_time_text)

__all__ = ["ValidationError", "decode_error_field", "plain", "INT32_MAX", "INT64_MAX", "count_field", "ObjectForm", "item_text", "line_list_field", "put",
           "field_text", "time_field", "LOADED", "form_changes", "loaded_text", "posted_loaded", "yaml_changes", "conflict_view", "flatten", "merge_diff", "reapply_yaml", "yaml_rows", "YamlForm",
           "LIMITS_HIT", "load_yaml", "note_limits_hit", "format_address", "format_env", "format_labels", "format_port", "numbered_lines",
           "parse_address_line", "parse_env", "parse_labels", "parse_port_line", "parse_time_text"]
