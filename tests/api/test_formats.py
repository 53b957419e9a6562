"""Value formats: Go's Time / MicroTime parsing, Quantity, durations (kube/formats.py), and their
normalization through the schema (schema.normalize_formats).

Plain functions on values: no database, no Django settings.
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, strategies as st

from dashboard.batch import strategy as jobs
from dashboard.kube import formats
from dashboard.kube import schema as v   # v: the normalization test came from test_validation.py
from rule_helpers import job


@pytest.mark.parametrize("text,expected", [
    ("2026-11-22T03:00:00.123456Z", "2026-11-22T03:00:00.123456Z"),
    ("2026-11-22T03:00:00.000000+02:00", "2026-11-22T01:00:00.000000Z"),
    ("2026-11-22T03:00:00,500000-01:30", "2026-11-22T04:30:00.500000Z"),   # Go accepts a comma
    ("2024-02-29T23:59:59.999999Z", "2024-02-29T23:59:59.999999Z"),
])
def test_micro_time_normalization(text, expected):
    assert formats.normalize_micro_time(text) == expected


@pytest.mark.parametrize("text,message", [
    ("x", 'parsing time "x" as "2006-01-02T15:04:05.000000Z07:00": cannot parse "x" as "2006"'),
    ("2026-11-22T03:00:00Z", 'parsing time "2026-11-22T03:00:00Z" as "2006-01-02T15:04:05.000000Z07:00": '
                             'cannot parse "Z" as ".000000"'),
    ("2026-11-22T03:00:00.123Z", 'parsing time "2026-11-22T03:00:00.123Z" as "2006-01-02T15:04:05.000000Z07:00": '
                                 'cannot parse ".123Z" as ".000000"'),
    ("2026-11-22 03:00:00.000000Z", 'parsing time "2026-11-22 03:00:00.000000Z" as '
                                    '"2006-01-02T15:04:05.000000Z07:00": cannot parse " 03:00:00.000000Z" as "T"'),
    ("2026-11-22T03:00:00.000000", 'parsing time "2026-11-22T03:00:00.000000" as '
                                   '"2006-01-02T15:04:05.000000Z07:00": cannot parse "" as "Z07:00"'),
    ("2026-13-01T00:00:00.000000Z", 'parsing time "2026-13-01T00:00:00.000000Z": month out of range'),
    ("2026-02-29T00:00:00.000000Z", 'parsing time "2026-02-29T00:00:00.000000Z": day out of range'),
    ("2026-01-01T24:00:00.000000Z", 'parsing time "2026-01-01T24:00:00.000000Z": hour out of range'),
    ("2026-01-01T00:00:00.000000Zz", 'parsing time "2026-01-01T00:00:00.000000Zz": extra text: "z"'),
])
def test_micro_time_errors(text, message):
    with pytest.raises(formats.FormatError) as exc:
        formats.normalize_micro_time(text)
    assert str(exc.value) == message


def test_time_normalization():
    assert formats.normalize_time("2026-11-22T03:00:00Z") == "2026-11-22T03:00:00Z"
    assert formats.normalize_time("2026-11-22T03:00:00.987654321+01:00") == "2026-11-22T02:00:00Z"   # seconds only
    with pytest.raises(formats.FormatError, match=r'cannot parse "" as "2006"'):
        formats.normalize_time("")
    assert formats.parse_time_lenient("2026-11-22T03:00:00.5Z") == datetime(2026, 11, 22, 3, 0, 0, 500000,
                                                                         tzinfo=timezone.utc)
    assert formats.parse_time_lenient("nope") is None and formats.parse_time_lenient(None) is None


@pytest.mark.parametrize("given,canonical", [
    ("100m", "100m"), ("0.1", "100m"), ("1000m", "1"), ("1.5", "1500m"), (0.5, "500m"), (2, "2"),
    ("1000", "1k"), ("1Gi", "1Gi"), ("1024Mi", "1Gi"), ("1.5Gi", "1536Mi"), ("1.5Ki", "1536"),
    ("512", "512"), ("0.5Gi", "512Mi"), ("129e6", "129e6"), ("1.5e3", "1500"), ("1E", "1E"),
    ("0", "0"), ("-0", "0"), ("0Gi", "0"), ("1e-12", "1e-9"), ("0.0000000001", "1n"), ("-1Gi", "-1Gi"),
    ("12345678901234567890", "12345678901234567890"), ("+1k", "1k"), (" 1 ", "1"), ("1.", "1"), (".5", "500m"),
])
def test_quantity_canonical(given, canonical):
    assert formats.canonical_quantity(given) == canonical


@pytest.mark.parametrize("bad,message", [
    ("", formats.QUANTITY_FORMAT_ERROR), ("abc", formats.QUANTITY_FORMAT_ERROR), ("1Gb", formats.QUANTITY_FORMAT_ERROR),
    ("1K", formats.QUANTITY_SUFFIX_ERROR), ("1e", formats.QUANTITY_SUFFIX_ERROR), ("1mi", formats.QUANTITY_SUFFIX_ERROR),
])
def test_quantity_errors(bad, message):
    with pytest.raises(formats.FormatError) as exc:
        formats.parse_quantity(bad)
    assert str(exc.value) == message


def test_quantity_compare():
    q = formats.parse_quantity
    assert q("500m").compare(q("0.5")) == 0
    assert q("1Gi").compare(q("1G")) == 1
    assert q("-1").compare(q("1m")) == -1
    assert q("1e100000000").compare(q("1e99999999")) == 1      # no huge integers involved


@given(st.integers(min_value=-10 ** 12, max_value=10 ** 12), st.integers(min_value=-9, max_value=12),
       st.sampled_from(["", "m", "k", "Ki", "Mi", "e3", "u"]))
def test_quantity_canonical_is_stable(mantissa, exponent, suffix):
    text = f"{mantissa}{suffix}" if suffix else f"{mantissa}e{exponent}"
    once = formats.canonical_quantity(text)
    assert formats.canonical_quantity(once) == once
    assert formats.parse_quantity(once).compare(formats.parse_quantity(text)) == 0


@given(st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30),
                    timezones=st.sampled_from([timezone.utc, timezone(timedelta(hours=5, minutes=30)),
                                               timezone(timedelta(hours=-8))])))
def test_micro_time_round_trip(moment):
    text = moment.isoformat(timespec="microseconds")               # +05:30 style offsets
    assert formats.parse_go_time(text, formats.MICRO_TIME_LAYOUT) == moment
    assert formats.normalize_micro_time(formats.normalize_micro_time(text)) == formats.normalize_micro_time(text)


@pytest.mark.parametrize("seconds,text", [
    (-5, "<invalid>"), (-1, "0s"), (0, "0s"), (119, "119s"), (120, "2m"), (150, "2m30s"), (600, "10m"),
    (3 * 3600 - 1, "179m"), (3 * 3600, "3h"), (3 * 3600 + 60 * 5, "3h5m"), (8 * 3600, "8h"), (47 * 3600, "47h"),
    (48 * 3600, "2d"), (50 * 3600, "2d2h"), (8 * 86400, "8d"), (800 * 86400, "2y70d"), (9 * 365 * 86400, "9y"),
])
def test_human_duration(seconds, text):
    assert formats.human_duration(seconds) == text


# Normalization through the schema -----------------------------------------------------

def test_normalize_formats_walks_the_schema():
    obj = job()
    pod = obj["spec"]["template"]["spec"]
    pod["volumes"] = [{"name": "s", "emptyDir": {"sizeLimit": "1024Mi"}}]
    pod["overhead"] = {"cpu": 0.25}
    obj["metadata"]["creationTimestamp"] = "2026-11-22T12:00:00.9Z"
    v.normalize_object(obj, jobs.DEFINITION)
    assert pod["volumes"][0]["emptyDir"]["sizeLimit"] == "1Gi"
    assert pod["overhead"] == {"cpu": "250m"}
    assert obj["metadata"]["creationTimestamp"] == "2026-11-22T12:00:00Z"
    assert v.normalize_formats({"holderIdentity": "x"}, "io.k8s.api.coordination.v1.LeaseSpec") == {"holderIdentity": "x"}


def _by_go_parser(layout, fmt):
    def slow(text):
        return fmt(formats.parse_go_time(text, layout))
    return slow


def _outcome(fn, text):
    try:
        return fn(text)
    except formats.FormatError as exc:
        return ("error", str(exc))


_fields = st.tuples(st.integers(0, 10000), st.integers(0, 13), st.integers(0, 32), st.integers(0, 25),
                    st.integers(0, 61), st.integers(0, 61), st.integers(0, 999999))


@given(_fields, st.sampled_from(["Z", "z", "+00:00", ""]), st.sampled_from(["", "٣"]))
def test_times_already_in_stored_form_normalize_as_gos_parser_does(fields, zone, digit):
    """The fast path for times sent in their stored form (formats._canonical) answers exactly
    what Go's parser and the formatter answer, for valid and invalid dates alike."""
    y, mo, d, h, mi, s, us = fields
    micro = f"{y:04d}-{mo:02d}-{d:02d}T{h:02d}:{mi:02d}:{s:02d}.{us:06d}{zone}".replace("1", digit or "1", 1)
    plain = f"{y:04d}-{mo:02d}-{d:02d}T{h:02d}:{mi:02d}:{s:02d}{zone}"
    assert _outcome(formats.normalize_micro_time, micro) == _outcome(
        _by_go_parser(formats.MICRO_TIME_LAYOUT, formats.format_micro_time), micro)
    assert _outcome(formats.normalize_time, plain) == _outcome(
        _by_go_parser(formats.TIME_LAYOUT, formats.format_time), plain)
