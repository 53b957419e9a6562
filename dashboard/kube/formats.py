"""Value formats, the one place they are parsed and written: metav1.Time and MicroTime (Go's
RFC 3339 layouts, with Go's error messages), durations as kubectl prints them, and Quantity.

The API decoder uses the strict Go parsers (normalize_*); everything that reads a stored time
(tables, pages, strategies, the simulator) uses parse_time, whose fast path is fromisoformat.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

UTC = timezone.utc


def json_kind(value: Any) -> str:
    """The JSON type of a decoded value, as Go's decoder names it in its errors."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else "null"


# Time and MicroTime ---------------------------------------------------------------------

class FormatError(ValueError):
    """A value its Go type refuses to decode; str() is Go's message, used verbatim."""


MICRO_TIME_LAYOUT = "2006-01-02T15:04:05.000000Z07:00"   # metav1.RFC3339Micro
TIME_LAYOUT = "2006-01-02T15:04:05Z07:00"                # time.RFC3339
# Each layout as (literal prefix, std element) pairs, as Go's nextStdChunk splits it.
_LAYOUT_CHUNKS = {
    MICRO_TIME_LAYOUT: [("", "2006"), ("-", "01"), ("-", "02"), ("T", "15"), (":", "04"), (":", "05"),
                        ("", ".000000"), ("", "Z07:00")],
    TIME_LAYOUT: [("", "2006"), ("-", "01"), ("-", "02"), ("T", "15"), (":", "04"), (":", "05"),
                  ("", "Z07:00")],
}


def _go_quote(s: str) -> str:
    """The time package's own quote (not strconv.Quote, which is selectors.go_quote)."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _days_in(month: int, year: int) -> int:
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def _getnum(s: str, fixed: bool) -> tuple[int, str] | None:
    """Go's getnum: one or two digits (exactly two when fixed)."""
    if not s or not s[0].isdigit() or not s[0].isascii():
        return None
    if len(s) < 2 or not (s[1].isdigit() and s[1].isascii()):
        return None if fixed else (int(s[0]), s[1:])
    return int(s[:2]), s[2:]


def go_atoi(text: str) -> int | None:
    """strconv.Atoi: an optional sign and ASCII digits; None when text is not that."""
    body = text[1:] if text[:1] in ("+", "-") else text
    if not body or not (body.isdigit() and body.isascii()):
        return None
    return int(text)


def parse_go_time(value: str, layout: str) -> datetime:
    """time.Parse(layout, value) for RFC3339 / RFC3339Micro, with Go's error messages.

    Returns an aware UTC datetime (microsecond precision; Go's extra nanoseconds are cut).
    """
    original = value
    year = month = day = hour = minute = second = 0
    nanos = 0
    offset = 0

    def fail(elem: str, rest: str, message: str = "") -> FormatError:
        if message:
            return FormatError(f"parsing time {_go_quote(original)}{message}")
        return FormatError(f"parsing time {_go_quote(original)} as {_go_quote(layout)}: "
                           f"cannot parse {_go_quote(rest)} as {_go_quote(elem)}")

    chunks = _LAYOUT_CHUNKS[layout]
    for index, (prefix, std) in enumerate(chunks):
        for ch in prefix:
            if not value or value[0] != ch:
                raise fail(prefix, value)
            value = value[1:]
        hold = value
        range_err = ""
        if std == "2006":
            if len(value) < 4 or not all(c.isdigit() and c.isascii() for c in value[:4]):
                raise fail(std, hold)
            year, value = int(value[:4]), value[4:]
        elif std in ("01", "02", "04", "05", "15"):
            got = _getnum(value, fixed=(std != "15"))
            if got is None:
                raise fail(std, hold)
            number, value = got
            if std == "01":
                month = number
                if not 1 <= month <= 12:
                    range_err = "month"
            elif std == "02":
                day = number          # checked against the month at the end, as Go does
            elif std == "15":
                hour = number
                if hour >= 24:
                    range_err = "hour"
            elif std == "04":
                minute = number
                if minute >= 60:
                    range_err = "minute"
            else:
                second = number
                if second >= 60:
                    range_err = "second"
                nxt = chunks[index + 1][1] if index + 1 < len(chunks) else ""
                # A fraction the layout does not spell out is still accepted after seconds.
                if (nxt != ".000000" and len(value) >= 2 and value[0] in ".,"
                        and value[1].isdigit() and value[1].isascii()):
                    n = 2
                    while n < len(value) and value[n].isdigit() and value[n].isascii():
                        n += 1
                    digits = value[1:min(n, 10)]
                    nanos = int(digits) * 10 ** (9 - len(digits))
                    value = value[n:]
        elif std == ".000000":
            if len(value) < 7 or value[0] not in ".,":
                raise fail(std, hold)
            number = go_atoi(value[1:7])   # six characters: time's atoi and Atoi agree
            if number is None:
                raise fail(std, hold)
            if number < 0:
                range_err = "fractional second"
            nanos, value = number * 1000, value[7:]
        elif std == "Z07:00":
            if value[:1] == "Z":
                value = value[1:]
            else:
                if len(value) < 6 or value[3] != ":" or value[0] not in "+-":
                    raise fail(std, hold)
                hh, mm = _getnum(value[1:3], True), _getnum(value[4:6], True)
                if hh is None or mm is None:
                    raise fail(std, hold)
                if hh[0] > 24:
                    range_err = "time zone offset hour"
                if mm[0] > 60:
                    range_err = "time zone offset minute"
                offset = (hh[0] * 60 + mm[0]) * 60 * (-1 if value[0] == "-" else 1)
                value = value[6:]
        if range_err:
            raise fail(std, value, f": {range_err} out of range")
    if value:
        raise fail("", value, f": extra text: {_go_quote(value)}")
    if day < 1 or day > _days_in(month, year):
        raise fail("", value, ": day out of range")
    try:
        local = datetime(year, month, day, hour, minute, second, nanos // 1000)
        return (local - timedelta(seconds=offset)).replace(tzinfo=timezone.utc)
    except (ValueError, OverflowError):
        # Go's years run from 0; Python's from 1. Such times are of no use to anyone.
        raise fail("", "", ": year out of range") from None


def format_micro_time(moment: datetime) -> str:
    """metav1.MicroTime on the wire: UTC, exactly six fractional digits, 'Z'."""
    return format_time(moment)[:-1] + f".{moment.microsecond:06d}Z"


def format_time(moment: datetime) -> str:
    """metav1.Time on the wire: UTC, whole seconds, 'Z' (years zero-padded, as Go pads them)."""
    t = moment.astimezone(timezone.utc)
    return f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}:{t.second:02d}Z"


# What clients almost always send: a time already in the form it is stored in (UTC, 'Z', six
# fractional digits for MicroTime, none for Time). Such a value is its own normal form once its
# fields are checked; anything else takes Go's parser (errors, offsets, other precisions).
_CANONICAL_MICRO = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)\.\d{6}Z", re.ASCII)
_CANONICAL_TIME = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)Z", re.ASCII)


def _canonical(value: str, pattern: re.Pattern) -> bool:
    match = pattern.fullmatch(value)
    if match is None:
        return False
    try:
        datetime(*map(int, match.groups()))   # a real date and time (Go's range checks)
    except ValueError:
        return False                          # let the parser word the error
    return True


def normalize_micro_time(value: Any) -> str:
    if not isinstance(value, str):
        raise FormatError(f"json: cannot unmarshal {json_kind(value)} into Go value of type string")
    if _canonical(value, _CANONICAL_MICRO):
        return value
    return format_micro_time(parse_go_time(value, MICRO_TIME_LAYOUT))


def normalize_time(value: Any) -> str:
    if not isinstance(value, str):
        raise FormatError(f"json: cannot unmarshal {json_kind(value)} into Go value of type string")
    if _canonical(value, _CANONICAL_TIME):
        return value
    return format_time(parse_go_time(value, TIME_LAYOUT))


def parse_time_lenient(value: Any) -> datetime | None:
    """A stored Time / MicroTime -> aware datetime; None when unset or unparseable."""
    if not isinstance(value, str) or not value:
        return None
    for layout in (MICRO_TIME_LAYOUT, TIME_LAYOUT):
        try:
            return parse_go_time(value, layout)
        except FormatError:
            continue
    return None


# Quantity --------------------------------------------------------------------------------

QUANTITY_FORMAT_ERROR = ("quantities must match the regular expression "
                         "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
# What the API's JSON decoder (schema.decode) lets through as a Quantity string: a decimal
# number and an optional SI / binary suffix or exponent. parse_quantity reads it afterwards.
_QUANTITY_LITERAL = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[numkMGTPE]|[KMGTPE]i|[eE][+-]?\d+)?$")
QUANTITY_SUFFIX_ERROR = "unable to parse quantity's suffix"
_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_BY_EXP = {v: k for k, v in _DECIMAL_SUFFIXES.items()}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_BINARY_BY_POWER = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
_MAX_INT64 = 2 ** 63 - 1


@dataclass(frozen=True)
class Quantity:
    """resource.Quantity: value = mantissa * 10**exponent, plus the format it was written in.

    Kept in decimal form (not a Fraction) so that "1e1000000" costs nothing.
    """

    mantissa: int
    exponent: int
    format: str = "DecimalSI"     # DecimalSI | BinarySI | DecimalExponent

    @staticmethod
    def make(mantissa: int, exponent: int, fmt: str) -> "Quantity":
        if mantissa == 0:
            return Quantity(0, 0, fmt)
        while mantissa % 10 == 0:
            mantissa //= 10
            exponent += 1
        return Quantity(mantissa, exponent, fmt)

    def sign(self) -> int:
        return (self.mantissa > 0) - (self.mantissa < 0)

    def is_integer(self) -> bool:
        return self.exponent >= 0 or self.mantissa == 0

    def compare(self, other: "Quantity") -> int:
        """-1, 0, 1 without expanding huge exponents."""
        a, b = Quantity.make(self.mantissa, self.exponent, ""), Quantity.make(other.mantissa, other.exponent, "")
        if a.sign() != b.sign():
            return -1 if a.sign() < b.sign() else 1
        if a.sign() == 0:
            return 0
        # Orders of magnitude first, then exact comparison once they are close.
        mag_a = len(str(abs(a.mantissa))) + a.exponent
        mag_b = len(str(abs(b.mantissa))) + b.exponent
        if mag_a != mag_b:
            bigger = 1 if mag_a > mag_b else -1
            return bigger * a.sign()
        shift = min(a.exponent, b.exponent)
        x = a.mantissa * 10 ** (a.exponent - shift)
        y = b.mantissa * 10 ** (b.exponent - shift)
        return (x > y) - (x < y)

    def __str__(self) -> str:
        return canonical_quantity_text(self)


def _scan_quantity(text: str) -> tuple[bool, str, str, str]:
    """parseQuantityString: (positive, numerator, denominator, suffix) or FormatError."""
    positive, pos, end = True, 0, len(text)
    if text[:1] in ("-", "+"):
        positive = text[0] != "-"
        pos = 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return positive, "0", "", ""
    start = pos
    while pos < end and text[pos] in "0123456789":
        pos += 1
    num = text[start:pos] or "0"
    denom = ""
    if pos < end and text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in "0123456789":
            pos += 1
        denom = text[start:pos]
    suffix_start = pos
    while pos < end and text[pos] in "eEinumkKMGTP":
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in "0123456789":
        pos += 1
    if pos < end:
        raise FormatError(QUANTITY_FORMAT_ERROR)
    return positive, num, denom, text[suffix_start:]


def check_quantity_literal(text: str) -> None:
    """The decoder's check of a Quantity string; FormatError(QUANTITY_FORMAT_ERROR) when off."""
    if not _QUANTITY_LITERAL.match(text):
        raise FormatError(QUANTITY_FORMAT_ERROR)


def parse_quantity(value: Any) -> Quantity:
    """resource.ParseQuantity (after Quantity.UnmarshalJSON's quote and space trimming)."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise FormatError(QUANTITY_FORMAT_ERROR)
    text = value.strip() if isinstance(value, str) else (str(value) if isinstance(value, int) else repr(value))
    if not text:
        raise FormatError(QUANTITY_FORMAT_ERROR)
    if text == "0":
        return Quantity(0, 0, "DecimalSI")
    positive, num, denom, suffix = _scan_quantity(text)
    if suffix in _DECIMAL_SUFFIXES:
        base, power, fmt = 10, _DECIMAL_SUFFIXES[suffix], "DecimalSI"
    elif suffix in _BINARY_SUFFIXES:
        base, power, fmt = 2, _BINARY_SUFFIXES[suffix], "BinarySI"
    elif len(suffix) > 1 and suffix[0] in "eE" and re.fullmatch(r"[+-]?[0-9]+", suffix[1:]):
        exp = int(suffix[1:])
        if not -(2 ** 63) <= exp < 2 ** 63:
            raise FormatError(QUANTITY_SUFFIX_ERROR)
        base, power, fmt = 10, exp, "DecimalExponent"
    else:
        raise FormatError(QUANTITY_SUFFIX_ERROR)
    mantissa, exponent = int(num + denom), -len(denom)
    if base == 10:
        exponent += power
    else:
        mantissa <<= power
    if exponent < -9 and mantissa:
        # Non-zero amounts below a nano round up to the next nano ("you asked for some").
        shift = -9 - exponent
        if shift > len(str(mantissa)):
            mantissa = 1
        else:
            mantissa = -(-mantissa // 10 ** shift)
        exponent = -9
    if fmt == "BinarySI":
        if Quantity(mantissa, exponent).compare(Quantity(_MAX_INT64, 0)) > 0:
            mantissa, exponent = _MAX_INT64, 0
        if mantissa == 0:
            fmt = "DecimalSI"
    return Quantity.make(mantissa if positive else -mantissa, exponent, fmt)


def canonical_quantity_text(q: Quantity) -> str:
    """Quantity.String(): the canonical spelling kube-apiserver answers with."""
    if q.mantissa == 0:
        return "0"
    fmt = q.format
    if fmt == "BinarySI":
        small = Quantity(-1024, 0).compare(q) < 0 < Quantity(1024, 0).compare(q)
        if small or not q.is_integer():
            fmt = "DecimalSI"
    if fmt == "BinarySI":
        value = abs(q.mantissa) * 10 ** q.exponent
        power = 0
        while value >= 1024 and value % 1024 == 0 and power < len(_BINARY_BY_POWER) - 1:
            value //= 1024
            power += 1
        return f"{'-' if q.mantissa < 0 else ''}{value}{_BINARY_BY_POWER[power]}"
    mantissa, exponent = q.mantissa, q.exponent
    rest = exponent % 3                 # make the exponent a multiple of 3, rounding down
    mantissa, exponent = mantissa * 10 ** rest, exponent - rest
    if fmt == "DecimalSI" and exponent in _DECIMAL_BY_EXP:
        return f"{mantissa}{_DECIMAL_BY_EXP[exponent]}"
    return f"{mantissa}" if exponent == 0 else f"{mantissa}e{exponent}"


def canonical_quantity(value: Any) -> str:
    return canonical_quantity_text(parse_quantity(value))


def parse_time(value: Any) -> datetime | None:
    """A stored or typed Time / MicroTime -> aware UTC datetime; None when unset or unparseable.

    fromisoformat first (fast: stored times are already in canonical form); what it refuses
    goes through Go's parser, so anything the API accepted parses here too. A time without a
    zone is read as UTC.
    """
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return parse_time_lenient(value)
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def now() -> datetime:
    return datetime.now(UTC)


# Durations ------------------------------------------------------------------------------

def human_duration(seconds: float) -> str:
    """apimachinery's duration.HumanDuration: ~2-3 significant figures.

    Up to 1s in the future counts as "now" (clock skew); further is "<invalid>".
    """
    s = int(seconds)            # truncates toward zero, like Go's int(d.Seconds())
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rest = s % 60
        return f"{minutes}m" if rest == 0 else f"{minutes}m{rest}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h" if rest == 0 else f"{hours}h{rest}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d" if rest == 0 else f"{hours // 24}d{rest}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        rest = (hours // 24) % 365
        years = hours // 24 // 365
        return f"{years}y" if rest == 0 else f"{years}y{rest}d"
    return f"{hours // 24 // 365}y"
