"""Several kept revisions of one object in one row of kube_revision_pack (issue 38's history cost;
compaction.py writes packs, revlog.py reads them; docs/ARCHITECTURE.md "What the history costs").

Past the watch window a revision row costs ~200 bytes beside its text (key columns, times, the
primary key and kube_rev_key entries): 2.88 million kept revisions a day are ~550 MB with empty
texts. So the kept MODIFIED revisions of one object within one clock hour (never its newest,
which the typed rows and the writes read, nor an ADDED or DELETED one) go into one pack row
(KUBEDASH_HISTORY_PACK_SECONDS: the span; 0 packs nothing):

    entries  zlib of JSON {"rv": [first rv, then differences], "at": [first write time in µs
             since the epoch, then differences], "up": [upstream rvs]} ("up" left out when all
             are ""): what counting and stepping read, small;
    texts    zlib of the revisions' full object texts joined by NUL (a JSON text holds none):
             successive revisions of one object differ in a few fields, so zlib keeps ~20 bytes
             of each beside the pack's first.

Every entry is a MODIFIED revision. A key's packs and rows never interleave: a pack holds a run
of the key's revisions with no row of the key between its first and last (revlog relies on it
to count: a row inside a pack's range is a pinned page's copy, kube/asof.py).
"""
from __future__ import annotations

import zlib
from datetime import datetime, timedelta, timezone
from itertools import accumulate

import orjson

SEPARATOR = "\x00"
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
LEVEL = 9

Entry = tuple[int, datetime, str]   # rv, write time, upstream rv


def _micros(moment: datetime) -> int:
    return (moment - EPOCH) // timedelta(microseconds=1)


def _differences(values: list[int]) -> list[int]:
    return values[:1] + [b - a for a, b in zip(values, values[1:])]


def encode(entries: list[Entry], texts: list[str]) -> tuple[bytes, bytes]:
    """(entries, texts) columns of a pack of these revisions (in rv order)."""
    assert entries and len(entries) == len(texts) and all(SEPARATOR not in t for t in texts)
    head = {"rv": _differences([rv for rv, _, _ in entries]),
            "at": _differences([_micros(at) for _, at, _ in entries])}
    if any(up for _, _, up in entries):
        head["up"] = [up for _, _, up in entries]
    return zlib.compress(orjson.dumps(head), LEVEL), zlib.compress(SEPARATOR.join(texts).encode(), LEVEL)


def head(data: bytes) -> tuple[list[int], list[int], list[str]]:
    """(rvs, write times in µs since the epoch, upstream rvs) of a pack's revisions, in rv order:
    no datetime made per revision (a page in the past reads a pack per object, a minute each)."""
    found = orjson.loads(zlib.decompress(bytes(data)))
    rvs = list(accumulate(found["rv"]))
    return rvs, list(accumulate(found["at"])), found.get("up") or [""] * len(rvs)


def rvs(data: bytes) -> list[int]:
    """A pack's revisions, in rv order."""
    return list(accumulate(orjson.loads(zlib.decompress(bytes(data)))["rv"]))


def moment(micros: int) -> datetime:
    """A write time of head()'s."""
    return EPOCH + timedelta(microseconds=micros)


def micros(at: datetime) -> int:
    """A moment as head()'s write times are (µs since the epoch)."""
    return _micros(at)


def entries(data: bytes) -> list[Entry]:
    """(rv, write time, upstream rv) of a pack's revisions, in rv order."""
    found, times, ups = head(data)
    return list(zip(found, map(moment, times), ups))


def texts(data: bytes) -> list[str]:
    """A pack's object texts, in rv order."""
    return zlib.decompress(bytes(data)).decode().split(SEPARATOR)


def text_at(data: bytes, index: int) -> str:
    """A pack's index-th object text, decompressed only as far as it."""
    stream, out, sep = zlib.decompressobj(), b"", SEPARATOR.encode()
    rest = bytes(data)
    while out.count(sep) <= index and not stream.eof and rest:
        out += stream.decompress(rest, 1 << 15)
        rest = stream.unconsumed_tail
    return out.decode().split(SEPARATOR)[index]


def span(moment: datetime, seconds: int) -> int:
    """Which span of `seconds` (KUBEDASH_HISTORY_PACK_SECONDS, an hour by default) a revision
    written at `moment` is packed in: one pack per key and span."""
    return _micros(moment) // (seconds * 10 ** 6)


def span_start(index: int, seconds: int) -> datetime:
    return EPOCH + timedelta(microseconds=index * seconds * 10 ** 6)
