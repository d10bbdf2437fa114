"""Slurm hostlists (``node[01-03,07],gpu-5``) as host names: the node lists of job records, read by the
diagnosis (which nodes a recovery tests) and the detection (which nodes a running job's telemetry
comes from)."""

from __future__ import annotations

import re

_MAX_HOSTS = 4_096

_BRACKET_RE = re.compile(r"^(?P<prefix>[^\[]*)\[(?P<ranges>[^\]]+)\](?P<suffix>.*)$")


def expand_hostlist(hostlist: str | None) -> list[str]:
    """Expand a Slurm hostlist (``node[01-03,07],gpu-5``) into host names; empty for none."""
    if not hostlist or str(hostlist).strip().lower() in ("none", "nan", "none assigned"):
        return []
    hosts: list[str] = []
    for part in _split_top_level(str(hostlist)):
        hosts.extend(_expand_one(part.strip()))
        if len(hosts) > _MAX_HOSTS:
            raise ValueError(f"hostlist {hostlist[:80]!r} expands to more than {_MAX_HOSTS} hosts")
    return hosts


def _split_top_level(text: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [p for p in parts if p.strip()]


def _expand_one(pattern: str) -> list[str]:
    match = _BRACKET_RE.match(pattern)
    if not match:
        return [pattern]
    out = []
    for item in match["ranges"].split(","):
        low, _, high = item.partition("-")
        if high and low.isdigit() and high.isdigit():
            width = len(low)
            numbers = [str(n).zfill(width) for n in range(int(low), int(high) + 1)]
        else:
            numbers = [item]
        for number in numbers:
            out.extend(_expand_one(f"{match['prefix']}{number}{match['suffix']}"))
    return out
