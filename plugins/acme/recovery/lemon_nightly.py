"""The nightly run's lemon-node step: rank a cluster's nodes, suggest keeping the worst cordoned, cordon them
only when ``ACME_LEMON_AUTO_CORDON`` says so.

The suggestion is a record in the lake (``recovery/lemon/cluster=<c>/date=<d>/suggestion.json``, keyed on the
run's day, so a re-run rewrites it) and, when it names a node, an on-call notice (:func:`lemon_notice`, a
message for ``acme.notify.outbox``). The nodes are the first ``ACME_LEMON_SUGGEST_TOP`` of the ranking whose
score reaches ``ACME_LEMON_MIN_SCORE``. With auto-cordon on, each of them that the recovery backend
(``ACME_RECOVERY_BACKEND``; the simulated cluster by default) does not already hold out of scheduling is
cordoned through it, once: a node the day's earlier record cordoned is not cordoned again.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta
from typing import TYPE_CHECKING, Any

from acme import lake_keys

if TYPE_CHECKING:
    from acme.lake import Lake
    from acme.recovery.backend import RecoveryBackend
    from acme.recovery.lemon import NodeScore
    from acme.settings import LemonSettings

BackendFactory = Callable[[str, "Lake"], "RecoveryBackend"]
_ISO_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def end_of_day(day: date) -> datetime:
    """The score's reference time for a day: its last instant (UTC), so the day's own failures count."""
    return datetime.combine(day + timedelta(days=1), time(0), tzinfo=UTC) - timedelta(microseconds=1)


def lemon_ranking(lake: Lake, cluster: str, until: datetime, settings: LemonSettings | None = None):
    """The cluster's nodes ranked by their score at ``until``, with the evidence read (``(ranking, evidence)``)."""
    from acme import settings as acme_settings
    from acme.recovery.lemon import ScoreWeights, rank_nodes
    from acme.recovery.lemon_evidence import collect_events

    settings = settings or acme_settings.lemon()
    evidence = collect_events(lake, cluster, until, settings)
    return rank_nodes(evidence.events, until, ScoreWeights.from_settings(settings)), evidence


def _default_backend(cluster: str, lake: Lake) -> RecoveryBackend:
    from acme.recovery.backends import make_backend

    return make_backend(cluster, lake)


def suggest_cordons(
    lake: Lake,
    cluster: str,
    day: date,
    settings: LemonSettings | None = None,
    backend_factory: BackendFactory = _default_backend,
) -> dict[str, Any]:
    """Rank, suggest, cordon when configured; write the day's suggestion record and return it (with the
    on-call notice under ``notice``, None when nothing is suggested)."""
    from acme import settings as acme_settings
    from acme.recovery.lemon import worst_nodes

    settings = settings or acme_settings.lemon()
    ranking, evidence = lemon_ranking(lake, cluster, end_of_day(day), settings)
    worst = worst_nodes(ranking, settings.suggest_top, settings.min_score)
    key = lake_keys.lemon_suggestion(cluster, day)
    earlier = {s["node"] for s in (lake.read_json(key) or {}).get("suggested", []) if s.get("cordoned_by_us")}
    backend = backend_factory(cluster, lake) if worst else None
    held = backend.cordoned([s.node for s in worst]) if backend else set()
    suggested = []
    for entry in worst:
        row = {
            **entry.to_row(),
            "already_cordoned": entry.node in held,
            "cordoned_by_us": entry.node in earlier,
        }
        if (
            settings.auto_cordon
            and backend is not None
            and not row["already_cordoned"]
            and not row["cordoned_by_us"]
        ):
            reason = f"acme lemon-node score {entry.score:.2f} (rank {entry.rank} of {cluster} as of {day})"
            row["cordon"] = backend.cordon(entry.node, reason)
            row["cordoned_by_us"] = True
        suggested.append(row)
    record = {
        "cluster": cluster,
        "day": day.isoformat(),
        "as_of": end_of_day(day).isoformat(),
        "auto_cordon": settings.auto_cordon,
        "backend": getattr(backend, "name", None),
        "half_life_days": settings.half_life_days,
        "lookback_days": settings.lookback_days,
        "nodes_ranked": len(ranking),
        "read": evidence.read,
        "unattributed": evidence.unattributed,
        "suggested": suggested,
    }
    url = lake.write_json(key, record)
    return {**record, "record": url, "notice": lemon_notice(record) if suggested else None}


def latest_suggestion(lake: Lake, cluster: str) -> tuple[str, dict[str, Any]] | None:
    """The cluster's newest suggestion record (the latest day's, whichever run wrote it) with its key; None
    before the first nightly run. What it suggests is the cluster's current list of lemon nodes."""
    folder = lake_keys.lemon_suggestions(cluster)
    days = {
        day: key
        for key in lake.list(folder)
        if key.endswith("/suggestion.json")
        and _ISO_DAY.fullmatch(day := lake_keys.partition_values(key).get("date", ""))
    }
    if not days:
        return None
    key = days[max(days)]
    record = lake.read_json(key)
    return (key, record) if record is not None else None


def lemon_notice(record: dict[str, Any]) -> dict[str, Any]:
    """The on-call message of a suggestion (``acme.notify``'s message shape; its id names the nodes, so the
    same suggestion is queued once)."""
    nodes = [s["node"] for s in record["suggested"]]
    action = (
        "cordoned them"
        if record["auto_cordon"]
        else "suggests keeping them cordoned (ACME_LEMON_AUTO_CORDON=off)"
    )
    lines = [
        f"Lemon nodes of {record['cluster']} as of {record['day']}: the nodes with the most recent infrastructure "
        f"failures across jobs and users. The nightly run {action}.",
        "",
    ]
    for s in record["suggested"]:
        state = (
            "already out of scheduling"
            if s["already_cordoned"]
            else ("cordoned" if s["cordoned_by_us"] else "in service")
        )
        lines.append(
            f"#{s['rank']} {s['node']}: score {s['score']:.2f}, {s['events']} failure events "
            f"({s['diagnosis_events']} diagnosed, {s['node_fail_events']} NODE_FAIL, {s['localization_events']} "
            f"localized, {s['telemetry_events']} Xid/ECC), {s['gpu_hours_lost']:.1f} GPU-hours lost; {state}"
        )
    digest = hashlib.sha256("\n".join(nodes).encode()).hexdigest()[:12]
    return {
        "id": f"lemon-{record['cluster']}-{record['day']}-{digest}",
        "kind": "lemon",
        "cluster": record["cluster"],
        "date": record["day"],
        "recipient": "oncall",
        "subject": f"[acme] {record['cluster']}: {len(nodes)} lemon node(s) - {', '.join(nodes[:5])}",
        "text": "\n".join(lines) + "\n",
        "jobs": [],
        "nodes": nodes,
    }


def ranking_rows(ranking: list[NodeScore], top: int | None = None) -> list[dict[str, Any]]:
    """The ranking as JSON-ready rows (the first ``top``, or all)."""
    return [entry.to_row() for entry in (ranking if top is None else ranking[:top])]
