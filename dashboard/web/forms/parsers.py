"""Text formats of the forms: what a person types <-> values (labels, times, addresses, ports,
environment variables). Whether the values are valid is the API's call, not the parser's."""
from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any

from django.core.exceptions import ValidationError

from dashboard.kube.formats import format_micro_time, parse_time

UTC = timezone.utc


def numbered_lines(text: str) -> list[tuple[int, str]]:
    """Non-blank lines with their 1-based line numbers (blank lines are allowed anywhere)."""
    return [(n, line.strip()) for n, line in enumerate((text or "").splitlines(), 1) if line.strip()]


def parse_labels(text: str) -> dict[str, str]:
    """`key=value` per line. Whether keys and values are valid labels is the API's call."""
    labels: dict[str, str] = {}
    problems = []
    for n, line in numbered_lines(text):
        key, eq, value = line.partition("=")
        if not eq:
            problems.append(f"Line {n}: write each label as key=value.")
            continue
        labels[key.strip()] = value.strip()
    if problems:
        raise ValidationError(problems)
    return labels


def format_labels(labels: dict | None) -> str:
    return "\n".join(f"{k}={v}" for k, v in sorted((labels or {}).items()))


def parse_time_text(text: str, now: datetime | None = None) -> str | None:
    """A time as typed -> metav1.MicroTime text (UTC, six fractional digits), or None if blank.

    Accepts RFC 3339 (with Z or an offset), a datetime-local value without a zone (read as
    UTC), a space instead of the T, and the word "now".
    """
    text = (text or "").strip()
    if not text:
        return None
    if text.lower() == "now":
        return format_micro_time(now or datetime.now(UTC))
    candidate = text.replace(" ", "T", 1)
    if candidate.endswith("z"):
        candidate = candidate[:-1] + "Z"
    moment = parse_time(candidate)
    if moment is None:
        raise ValidationError("Enter a time like 2025-01-02T03:04:05Z (RFC 3339, UTC) or “now”.")
    return format_micro_time(moment)


def parse_address_line(line: str) -> dict:
    """`ip [hostname|-] [nodeName]` -> an EndpointAddress (validity is the API's call)."""
    parts = line.split()
    if len(parts) > 3:
        raise ValueError("write at most: IP, hostname (or -) and node name")
    address = {"ip": parts[0]}
    if len(parts) > 1 and parts[1] != "-":
        address["hostname"] = parts[1]
    if len(parts) > 2 and parts[2] != "-":
        address["nodeName"] = parts[2]
    return address


def format_address(address: dict) -> str:
    parts = [address.get("ip", "")]
    if address.get("hostname") or address.get("nodeName"):
        parts.append(address.get("hostname") or "-")
    if address.get("nodeName"):
        parts.append(address["nodeName"])
    return " ".join(parts)


def parse_port_line(line: str) -> dict:
    """`[name] port [protocol]` -> an EndpointPort. The number is the token that locates it.
    The readiness matrix's notation is accepted too: `http 80/TCP` (port/protocol)."""
    parts = [part for token in line.split() for part in _split_port_protocol(token)]
    numeric = [i for i, p in enumerate(parts) if re.fullmatch(r"-?\d+", p)]
    if not numeric or len(parts) > 3:
        raise ValueError("write [name] port [protocol], e.g. “http 80 TCP”")
    at = numeric[0] if len(parts) < 3 else 1
    if at > 1 or not re.fullmatch(r"-?\d+", parts[at]):
        raise ValueError("write [name] port [protocol], e.g. “http 80 TCP”")
    port: dict[str, Any] = {"port": int(parts[at])}
    if at == 1:
        port["name"] = parts[0]
    if at + 1 < len(parts):
        port["protocol"] = parts[at + 1]
    return port


def _split_port_protocol(token: str) -> list[str]:
    """"80/TCP" -> ["80", "TCP"] (how the pages write a port); any other token as it is."""
    m = re.fullmatch(r"(-?\d+)/(\w+)", token)
    return [m.group(1), m.group(2)] if m else [token]


def format_port(port: dict) -> str:
    parts = [port["name"]] if port.get("name") else []
    parts.append(str(port.get("port", "")))
    parts.append(port.get("protocol") or "TCP")
    return " ".join(parts)


def parse_env(text: str) -> list[dict]:
    env, problems = [], []
    for n, line in numbered_lines(text):
        name, eq, value = line.partition("=")
        if not eq:
            problems.append(f"Line {n}: write each variable as NAME=value.")
            continue
        env.append({"name": name.strip(), "value": value})
    if problems:
        raise ValidationError(problems)
    return env


def format_env(env: list | None) -> str:
    return "\n".join(f"{e.get('name', '')}={e.get('value', '')}" for e in env or () if "valueFrom" not in e)
