"""StatsD in, Prometheus out: counters, gauges and timers of Airflow's StatsD metrics.

A stand-in for prom/statsd-exporter with its default mapping (dots and dashes become
underscores; counters ``<name>_total``... here plain ``<name>`` counters, gauges, timers as
summaries in seconds). Flags: --web.listen-address=HOST:PORT, --statsd.listen-udp=HOST:PORT.
"""

from __future__ import annotations

import re
import socket
import sys

from prometheus_client import Counter, Gauge, Summary, start_http_server

_METRICS: dict[tuple[str, str], object] = {}
_INVALID = re.compile(r"[^a-zA-Z0-9_:]")


def _metric(kind: str, name: str):  # noqa: ANN202
    key = (kind, name)
    if key not in _METRICS:
        factory = {"c": Counter, "g": Gauge, "ms": Summary}[kind]
        _METRICS[key] = factory(name, f"StatsD {kind} {name}")
    return _METRICS[key]


def handle(line: str) -> None:
    """One StatsD line, ``name:value|type[|@rate]``; anything else is skipped."""
    try:
        name, rest = line.split(":", 1)
        value, kind = rest.split("|")[:2]
        number = float(value)
    except ValueError:
        return
    if kind not in ("c", "g", "ms"):
        return
    metric = _metric(kind, _INVALID.sub("_", name))
    if kind == "c":
        metric.inc(max(number, 0.0))
    elif kind == "g":
        metric.set(number)
    else:
        metric.observe(number / 1000.0)


def main(argv: list[str]) -> int:
    flags = dict(arg.lstrip("-").split("=", 1) for arg in argv)
    web_host, _, web_port = flags.get("web.listen-address", "127.0.0.1:9102").rpartition(":")
    udp_host, _, udp_port = flags.get("statsd.listen-udp", "127.0.0.1:9125").rpartition(":")
    start_http_server(int(web_port), addr=web_host or "127.0.0.1")
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((udp_host or "127.0.0.1", int(udp_port)))
    print(f"statsd-exporter: StatsD on {udp_host}:{udp_port}/udp, metrics on {web_host}:{web_port}", flush=True)
    while True:
        data = sock.recv(65535)
        for line in data.decode("utf-8", "replace").splitlines():
            handle(line.strip())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
