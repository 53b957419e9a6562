"""A logged object stored as a delta against another revision of the same key (issue 38's history
cost; compaction.py writes them, revlog.py reads them; docs/ARCHITECTURE.md "Time travel").

Past the watch window, most kept revisions of an object differ from a nearby one in a few
fields (a Lease's renewTime and managedFields' time, a Job's succeeded count, resourceVersion).
Such a revision's `object` text is stored as ``=<base rv> <patch>``, where the base is a full
text of the same key and the patch a tagged tree (each node a list, so no object key can be
mistaken for an instruction):

    ["=", value]            the value here is `value`
    ["{", {key: node}]      a dict with the same keys in the same order, these ones patched
    ["[", {"index": node}]  a list of the same length, these items patched

A dict whose keys (or their order) changed, or a list whose length did, is replaced whole, so
`apply` rebuilds the same keys in the same order and the text it gives back is the stored text
byte for byte: `encode` checks that before offering a delta (else the text stays full). A full
text always starts with "{", so the two never meet.
"""
from __future__ import annotations

import orjson

MARK = "="


def is_delta(text: str) -> bool:
    return text.startswith(MARK)


def base_of(text: str) -> int:
    """The base revision a delta text names."""
    return int(text[1:text.index(" ")])


def _diff(a, b):
    """The node that turns a into b (None: they are equal)."""
    if a == b and type(a) is type(b):
        return None
    if isinstance(a, dict) and isinstance(b, dict) and list(a) == list(b):
        return ["{", {k: n for k in b if (n := _diff(a[k], b[k])) is not None}]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return ["[", {str(i): n for i, (x, y) in enumerate(zip(a, b)) if (n := _diff(x, y)) is not None}]
    return ["=", b]


def _apply(value, node):
    tag, body = node
    if tag == "=":
        return body
    if tag == "{":
        return {k: (_apply(v, body[k]) if k in body else v) for k, v in value.items()}
    out = list(value)
    for i, n in body.items():
        out[int(i)] = _apply(out[int(i)], n)
    return out


def encode(text: str, base_rv: int, base_text: str) -> str | None:
    """`text` as a delta against the full `base_text` (revision base_rv), or None when that would
    not give the same text back or would not be smaller."""
    old, new = orjson.loads(base_text), orjson.loads(text)
    node = _diff(old, new) or ["{", {}]
    out = f"{MARK}{base_rv} {orjson.dumps(node).decode()}"
    if len(out) >= len(text) or orjson.dumps(_apply(old, node)).decode() != text:
        return None
    return out


def decode(text: str, base_text: str) -> str:
    """The full text of a delta, given its base's full text."""
    node = orjson.loads(text[text.index(" ") + 1:])
    return orjson.dumps(_apply(orjson.loads(base_text), node)).decode()
