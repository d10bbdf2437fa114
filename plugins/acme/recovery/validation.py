"""Validation of a cordoned node before it rejoins: which nodes, their checks, the verdict, the uncordon.

SuperBench (ATC'24) validates a node before it takes work again. Here the nodes are those a recovery
cordoned (``cordon`` records of the action logs in the lake, ``recovery/cluster=<c>/job=…``) that the
backend still reports out of scheduling, or the nodes a run names. Each is measured through its backend
(``run_validation``: ``acme.recovery.node_selftest``) and judged by four checks:

- ``allgather``: the self-test passed on every rank (one per GPU, ``ACME_VALIDATION_RANKS_PER_NODE``);
- ``dcgm_diag``: ``dcgmi diag -r ACME_VALIDATION_DCGM_LEVEL`` ran with no failed test;
- ``gpu_memory``: every rank saw its GPU, each with at least ``ACME_VALIDATION_MIN_FREE_MEMORY_SHARE`` of
  its memory free;
- ``nccl_bandwidth``: the slowest rank's all-gather bus bandwidth (nccl-tests' busbw: ``(n-1)/n`` of the
  gathered bytes over the time) is at least ``ACME_VALIDATION_MIN_BUSBW_GBPS``.

A node is uncordoned only when every check passes (``skipped`` passes: a check the settings turn off, or
the GPU checks of a CPU cluster with ``ACME_VALIDATION_GPU_REQUIRED=false``). The evidence is one
``validate`` record (each check with its figures, status and times) in the node's action log
``recovery/cluster=<c>/node=<node>/<validation_id>/actions.jsonl``, then an ``uncordon`` record. Both carry
idempotency keys, so re-running the same validation (keyed on its run) measures and uncordons once; a
later run finds an uncordoned node no longer cordoned and leaves it alone. A dry run measures and records
the verdict, and only plans the uncordon.

A node the cluster's **latest lemon-node list** names (``acme.recovery.lemon_nightly``: the newest
``recovery/lemon/cluster=<c>/date=<d>/suggestion.json``, whose ``suggested`` nodes are the first
``ACME_LEMON_SUGGEST_TOP`` of the ranking with a score of at least ``ACME_LEMON_MIN_SCORE``) is validated and
its verdict recorded as any other, but when it passes its uncordon is **held** (``ACME_VALIDATION_LEMON_NODES=
hold``, the default): one passed self-test does not clear a node that keeps failing across jobs. The log
then has an ``uncordon`` record with status ``held`` and the reason (``held: lemon node, score X, rank k in
<list key>``), once per validation; the run's summary lists it under ``held_lemon``; a live run returns an
on-call notice (:func:`lemon_hold_notice`, queued once per node and list). An operator returns the node on
purpose with a run that names it and sets ``allow_lemon`` (the uncordon record then says so), or turns the
hold off with ``ACME_VALIDATION_LEMON_NODES=uncordon``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from acme.errors import InputError
from acme.recovery.actions import ActionLog, checked_name
from acme.recovery.node_selftest import NodeMeasurements, ValidationSpec

if TYPE_CHECKING:
    from acme.lake import Lake
    from acme.recovery.backend import RecoveryBackend
    from acme.settings import RecoverySettings, ValidationSettings

ACTION_LOG = re.compile(r"^recovery/cluster=([^/]+)/job=([^/]+)/([^/]+)/actions\.jsonl$")
NODE_LOG = re.compile(r"^recovery/cluster=([^/]+)/node=([^/]+)/([^/]+)/actions\.jsonl$")
PASS, FAIL, SKIPPED = "pass", "fail", "skipped"
HELD = "held"


def node_log(lake: Lake, cluster: str, node: str, validation_id: str) -> ActionLog:
    """The action log of one validation of one node (module docstring)."""
    from acme import lake_keys

    folder = lake_keys.recovery_node(checked_name(cluster, "cluster"), checked_name(node, "node"))
    return ActionLog(lake, cluster, node, validation_id, folder=folder)


# --- which nodes ----------------------------------------------------------------------------------


def _live_done(record: Mapping[str, Any], step: str) -> bool:
    return record.get("step") == step and record.get("status") == "done" and not record.get("dry_run")


def cordons_in_lake(lake: Lake, cluster: str | None = None) -> dict[tuple[str, str], list[str]]:
    """(cluster, node) → the recoveries that cordoned it (live ``cordon`` records done), from every action log.

    A node whose last validation uncordoned it after its last recovery cordon is left out: if it is out
    of scheduling again, a person (or another tool) put it there, and only a run naming it validates it.
    """
    cordons: dict[tuple[str, str], list[tuple[str, str]]] = {}
    returned: dict[tuple[str, str], str] = {}
    prefix = f"recovery/cluster={cluster}/" if cluster else "recovery/"
    for key in lake.list(prefix):
        job_log, validation_log = ACTION_LOG.match(key), NODE_LOG.match(key)
        if job_log:
            for record in ActionLog(lake, *job_log.groups()).records():
                node = (record.get("inputs") or {}).get("node")
                if node and _live_done(record, "cordon"):
                    source = f"{record.get('job_id')}/{record.get('recovery_id')}"
                    cordons.setdefault((job_log.group(1), node), []).append((record["ended_at"], source))
        elif validation_log:
            where = (validation_log.group(1), validation_log.group(2))
            for record in node_log(lake, *validation_log.groups()).records():
                if _live_done(record, "uncordon"):
                    returned[where] = max(returned.get(where, ""), record["ended_at"])
    return {
        where: [source for _, source in sorted(found)]
        for where, found in cordons.items()
        if max(found)[0] > returned.get(where, "")
    }


def nodes_to_validate(
    lake: Lake,
    cluster: str | None,
    nodes: Sequence[str],
    backend_for: Callable[[str], RecoveryBackend],
    allow_lemon: bool = False,
) -> list[dict[str, Any]]:
    """The nodes to validate now: the given ones (``cluster`` required), else those the action logs cordoned;
    in both cases only those the backend still reports cordoned (a node in service is never validated).
    ``allow_lemon`` (uncordon flagged lemon nodes that pass) needs named nodes: it is an operator's decision
    about those nodes, never a blanket one over every cordoned node."""
    if allow_lemon and not nodes:
        raise InputError(
            "allow_lemon", "uncordons only the lemon nodes a run names: give them in the nodes Param"
        )
    if nodes:
        if not cluster:
            raise InputError("cluster", "the nodes Param needs the cluster they belong to")
        for node in nodes:
            checked_name(node, "node")
        wanted = {(cluster, node): ["named by the run"] for node in nodes}
    else:
        wanted = cordons_in_lake(lake, cluster)
    targets = []
    for each_cluster in sorted({c for c, _ in wanted}):
        candidates = sorted(node for c, node in wanted if c == each_cluster)
        still = backend_for(each_cluster).cordoned(candidates)
        for node in candidates:
            if node in still:
                targets.append(
                    {"cluster": each_cluster, "node": node, "cordoned_by": wanted[(each_cluster, node)]}
                )
    return targets


# --- the checks -----------------------------------------------------------------------------------


def _check(name: str, status: str, reason: str, figures: Mapping[str, Any], times: tuple[str, str]) -> dict:
    return {"check": name, "status": status, "ok": status != FAIL, "reason": reason, "figures": dict(figures),
            "started_at": times[0], "ended_at": times[1]}  # fmt: skip


def judge_allgather(measured: NodeMeasurements, ranks: int) -> dict[str, Any]:
    times = (measured.selftest_started_at, measured.selftest_ended_at)
    reports = measured.reports
    failed = [
        f"rank {r.get('rank')}: {r.get('error') or 'failed without a reason'}"
        for r in reports
        if r.get("ok") is not True
    ]
    figures = {"ranks_expected": ranks, "ranks_reported": len(reports), "exit_status": measured.selftest_exit,
               "backend": reports[0].get("backend") if reports else None,
               "slowest_check_s": max((float(r.get("check_s") or 0) for r in reports), default=None)}  # fmt: skip
    if measured.problem:
        return _check("allgather", FAIL, measured.problem, figures, times)
    if failed or len(reports) < ranks:
        missing = [] if len(reports) >= ranks else [f"{ranks - len(reports)} of {ranks} ranks did not report"]
        return _check("allgather", FAIL, "; ".join(missing + failed), figures, times)
    return _check("allgather", PASS, f"{ranks} ranks all-gathered and multiplied", figures, times)


def judge_gpu_memory(measured: NodeMeasurements, settings: ValidationSettings) -> dict[str, Any]:
    times = (measured.selftest_started_at, measured.selftest_ended_at)
    gpus = {
        str(r.get("device")): r["gpu_memory"]
        for r in measured.reports
        if isinstance(r.get("gpu_memory"), dict)
    }
    shares = {
        device: round(m["free_gb"] / m["total_gb"], 4) for device, m in gpus.items() if m.get("total_gb")
    }
    figures = {"gpus": len(gpus), "ranks": settings.ranks_per_node, "free_share": shares,
               "total_gb": {d: m.get("total_gb") for d, m in gpus.items()},
               "min_free_share": settings.min_free_memory_share}  # fmt: skip
    if measured.problem or not measured.reports:
        return _check("gpu_memory", FAIL, measured.problem or "no self-test report to read", figures, times)
    if not gpus:
        if not settings.gpu_required:
            return _check(
                "gpu_memory",
                SKIPPED,
                "no GPU on the node (ACME_VALIDATION_GPU_REQUIRED=false)",
                figures,
                times,
            )
        return _check(
            "gpu_memory", FAIL, "the self-test saw no GPU (ACME_VALIDATION_GPU_REQUIRED=true)", figures, times
        )
    low = [f"{d}: {shares[d]:.0%} free" for d in sorted(shares) if shares[d] < settings.min_free_memory_share]
    if len(gpus) < settings.ranks_per_node:
        low.insert(0, f"only {len(gpus)} of {settings.ranks_per_node} GPUs answered")
    if low:
        return _check("gpu_memory", FAIL, "; ".join(low), figures, times)
    return _check(
        "gpu_memory", PASS, f"{len(gpus)} GPUs, at least {min(shares.values()):.0%} free", figures, times
    )


def bus_bandwidth_gbps(report: Mapping[str, Any]) -> float | None:
    """nccl-tests' all-gather busbw of one rank: ``(n-1)/n`` of the gathered bytes over its all-gather time."""
    seconds = (report.get("phases") or {}).get("allgather_s")
    size, megabytes = report.get("world_size"), report.get("allgather_mb")
    if not seconds or not size or not megabytes or size < 2:
        return None
    return (size - 1) * float(megabytes) * 2**20 / float(seconds) / 1e9


def judge_bandwidth(measured: NodeMeasurements, settings: ValidationSettings) -> dict[str, Any]:
    times = (measured.selftest_started_at, measured.selftest_ended_at)
    ok_reports = [r for r in measured.reports if r.get("ok") is True]
    rates = {str(r.get("rank")): bus_bandwidth_gbps(r) for r in ok_reports}
    known = {rank: round(rate, 3) for rank, rate in rates.items() if rate is not None}
    slowest = min(known.values(), default=None)
    figures = {"busbw_gbps_by_rank": known, "slowest_busbw_gbps": slowest,
               "min_busbw_gbps": settings.min_busbw_gbps,
               "backend": ok_reports[0].get("backend") if ok_reports else None}  # fmt: skip
    if settings.ranks_per_node < 2:
        return _check("nccl_bandwidth", SKIPPED, "a one-rank self-test moves no data between GPUs "
                      "(ACME_VALIDATION_RANKS_PER_NODE=1)", figures, times)  # fmt: skip
    if measured.problem or not ok_reports or len(ok_reports) < len(measured.reports) or slowest is None:
        return _check(
            "nccl_bandwidth", FAIL, measured.problem or "no bandwidth: the self-test failed", figures, times
        )
    if slowest < settings.min_busbw_gbps:
        reason = f"slowest rank {slowest:.1f} GB/s < {settings.min_busbw_gbps:g} GB/s"
        return _check("nccl_bandwidth", FAIL, reason, figures, times)
    return _check("nccl_bandwidth", PASS, f"slowest rank {slowest:.1f} GB/s", figures, times)


def dcgm_results(document: Mapping[str, Any]) -> dict[str, list[str]]:
    """Test name → the statuses of its results (one per GPU), from a ``dcgmi diag -j`` document
    (``{"DCGM GPU Diagnostic": {"test_categories": [{"tests": [{"name", "results": [{"status"}]}]}]}}``)."""
    tests: dict[str, list[str]] = {}
    diagnostic = document.get("DCGM GPU Diagnostic") or {}
    for category in diagnostic.get("test_categories") or []:
        for test in category.get("tests") or []:
            statuses = [str(r.get("status", "")).lower() for r in test.get("results") or []]
            tests[str(test.get("name"))] = statuses
    return tests


def judge_dcgm(measured: NodeMeasurements, settings: ValidationSettings) -> dict[str, Any]:
    times = (measured.dcgm_started_at, measured.dcgm_ended_at)
    level = settings.dcgm_level
    if level == 0:
        return _check("dcgm_diag", SKIPPED, "ACME_VALIDATION_DCGM_LEVEL=0", {"level": 0}, times)
    if measured.problem:
        return _check("dcgm_diag", FAIL, measured.problem, {"level": level}, times)
    output, status = measured.dcgm_output.lower(), measured.dcgm_exit
    if status == 127 or "dcgmi: not found" in output or "dcgmi: command not found" in output:
        status_if = SKIPPED if not settings.gpu_required else FAIL
        return _check("dcgm_diag", status_if, f"dcgmi is not installed on the node (ACME_VALIDATION_GPU_REQUIRED="
                      f"{str(settings.gpu_required).lower()})", {"level": level, "exit_status": status}, times)  # fmt: skip
    if measured.dcgm is None:
        reason = f"dcgmi diag -r {level} printed no JSON (exit {status}): {measured.dcgm_output[-300:]}"
        return _check("dcgm_diag", FAIL, reason, {"level": level, "exit_status": status}, times)
    tests = dcgm_results(measured.dcgm)
    failed = sorted(name for name, statuses in tests.items() if "fail" in statuses)
    figures = {"level": level, "exit_status": status, "tests": {n: sorted(set(s)) for n, s in tests.items()},
               "failed_tests": failed}  # fmt: skip
    if failed or status != 0:
        reason = f"failed tests: {', '.join(failed)}" if failed else f"dcgmi exited {status}"
        return _check("dcgm_diag", FAIL, reason, figures, times)
    return _check("dcgm_diag", PASS, f"level {level}: {len(tests)} tests passed", figures, times)


def judge(measured: NodeMeasurements, settings: ValidationSettings) -> list[dict[str, Any]]:
    """The four checks of one node's measurements (module docstring)."""
    return [
        judge_allgather(measured, settings.ranks_per_node),
        judge_dcgm(measured, settings),
        judge_gpu_memory(measured, settings),
        judge_bandwidth(measured, settings),
    ]


# --- one node ---------------------------------------------------------------------------------------


def validation_spec(
    validation_id: str, settings: ValidationSettings, recovery: RecoverySettings
) -> ValidationSpec:
    return ValidationSpec(
        validation_id=checked_name(validation_id, "validation_id"),
        ranks=settings.ranks_per_node,
        dcgm_level=settings.dcgm_level,
        timeout_s=recovery.check_timeout_s,
        check_args=recovery.check_args,
    )


def measure_and_judge(
    log: ActionLog,
    backend: RecoveryBackend,
    node: str,
    spec: ValidationSpec,
    settings: ValidationSettings,
    dry_run: bool,
) -> dict[str, Any]:
    """The ``validate`` record of the node: a re-run of the same validation reuses the recorded one."""
    key = f"validate:{node}"
    earlier = log.done_or_planned(key, dry_run)
    if earlier is not None:
        return {**earlier["result"], "reused": earlier["ended_at"]}
    thresholds = {"dcgm_level": settings.dcgm_level, "ranks": settings.ranks_per_node,
                  "min_busbw_gbps": settings.min_busbw_gbps, "min_free_memory_share": settings.min_free_memory_share,
                  "gpu_required": settings.gpu_required}  # fmt: skip
    with log.step(
        "validate", {"node": node, "backend": backend.name, "thresholds": thresholds}, dry_run, key
    ) as result:
        measured = backend.run_validation(node, spec)
        checks = judge(measured, settings)
        failed = [c["check"] for c in checks if not c["ok"]]
        result.update(node=node, passed=not failed, failed_checks=failed, checks=checks,
                      problem=measured.problem, details=measured.details)  # fmt: skip
        result["status"] = "done"  # the checks really ran (a dry run only plans the uncordon)
    return {k: v for k, v in result.items() if k != "status"}


def validate_node(
    lake: Lake,
    backend: RecoveryBackend,
    cluster: str,
    node: str,
    spec: ValidationSpec,
    settings: ValidationSettings,
    dry_run: bool,
    allow_lemon: bool = False,
) -> dict[str, Any]:
    """Measure and judge one cordoned node, then uncordon it once when every check passed (recorded) — unless
    the latest lemon-node list flags it: then the uncordon is held (module docstring). ``allow_lemon``: the
    run names the node on purpose, and a flagged node is uncordoned all the same."""
    log = node_log(lake, cluster, node, spec.validation_id)
    verdict = measure_and_judge(log, backend, node, spec, settings, dry_run)
    outcome = {"cluster": cluster, "node": node, "passed": verdict["passed"], "failed_checks": verdict["failed_checks"],
               "action_log": lake.url(log.key), "uncordoned": False}  # fmt: skip
    if not verdict["passed"]:
        outcome["kept_cordoned"] = f"failed {', '.join(verdict['failed_checks'])}"
        return outcome
    key = f"uncordon:{node}"
    held = held_before(log, key, dry_run)
    if held is not None:  # the notice again (queued once by its id): a retry after a crash before queueing it
        lemon = held["inputs"]["lemon"]
        return {**outcome, "held": held["result"]["held"], "lemon": lemon, "skipped": f"already recorded at "
                f"{held['ended_at']}", "notice": None if dry_run else lemon_hold_notice(log, node, lemon)}  # fmt: skip
    earlier = log.done_or_planned(key, dry_run)
    if earlier is not None:
        return {**outcome, "uncordoned": not dry_run, "skipped": f"already recorded at {earlier['ended_at']}"}
    lemon = lemon_flag(lake, cluster, node)
    allowed_by = lemon_allowed_by(settings, allow_lemon) if lemon else None
    if lemon and allowed_by is None:
        return {**outcome, **hold_uncordon(log, node, lemon, key, dry_run)}
    reason = (
        f"acme validation {spec.validation_id}: passed {', '.join(c['check'] for c in verdict['checks'])}"
    )
    inputs = {"node": node, "reason": reason, **({"lemon": lemon, "allowed_by": allowed_by} if lemon else {})}
    with log.step("uncordon", inputs, dry_run, key) as result:
        if dry_run:
            result["planned"] = f"would uncordon {node} through {backend.name}"
        else:
            result.update(backend.uncordon(node, reason))
    return {**outcome, "uncordoned": not dry_run, **({"planned": result["planned"]} if dry_run else {}),
            **({"lemon": lemon, "allowed_by": allowed_by} if lemon else {})}  # fmt: skip


# --- lemon nodes ------------------------------------------------------------------------------------


def lemon_flag(lake: Lake, cluster: str, node: str) -> dict[str, Any] | None:
    """The node's entry in the cluster's latest lemon-node list (``acme.recovery.lemon_nightly``: the first
    ``ACME_LEMON_SUGGEST_TOP`` of the ranking whose score reached ``ACME_LEMON_MIN_SCORE``, as the newest
    nightly run wrote them), with the list's key and day; None when that list does not name it, or none exists."""
    from acme.recovery.lemon_nightly import latest_suggestion

    latest = latest_suggestion(lake, cluster)
    if latest is None:
        return None
    key, record = latest
    entry = next((s for s in record.get("suggested") or [] if s.get("node") == node), None)
    if entry is None:
        return None
    return {"score": entry["score"], "rank": entry["rank"], "events": entry.get("events"),
            "gpu_hours_lost": entry.get("gpu_hours_lost"), "last_failure": entry.get("last_failure"),
            "list": key, "as_of": record.get("day")}  # fmt: skip


def lemon_allowed_by(settings: ValidationSettings, allow_lemon: bool) -> str | None:
    """Who lets a flagged lemon node be uncordoned: the run (its ``allow_lemon`` Param), the setting, or no one."""
    from acme.settings import UNCORDON_LEMON

    if allow_lemon:
        return "the run's allow_lemon Param (it names the node)"
    if settings.lemon_nodes == UNCORDON_LEMON:
        return "ACME_VALIDATION_LEMON_NODES=uncordon"
    return None


def held_before(log: ActionLog, key: str, dry_run: bool) -> dict[str, Any] | None:
    """This validation's earlier held uncordon of the node (same dry-run flag), so a re-run holds it once."""
    held = [
        record
        for record in log.records()
        if record.get("idempotency_key") == key
        and record.get("status") == HELD
        and bool(record.get("dry_run")) == dry_run
    ]
    return held[-1] if held else None


def hold_uncordon(
    log: ActionLog, node: str, lemon: Mapping[str, Any], key: str, dry_run: bool
) -> dict[str, Any]:
    """Record the held uncordon of a flagged lemon node that passed; its outcome, with the on-call notice
    (a live run's only: a dry run uncordons nothing anyway)."""
    held = f"held: lemon node, score {lemon['score']:.2f}, rank {lemon['rank']} in {lemon['list']}"
    with log.step("uncordon", {"node": node, "lemon": dict(lemon)}, dry_run, key) as result:
        result.update(held=held, release=RELEASE_HINT, status=HELD)
    notice = None if dry_run else lemon_hold_notice(log, node, lemon)
    return {"held": held, "lemon": dict(lemon), "notice": notice}


RELEASE_HINT = (
    "a manual validate_nodes run that names the node in nodes with allow_lemon=true (and dry_run=false) "
    "uncordons it once it passes; or set ACME_VALIDATION_LEMON_NODES=uncordon"
)


def lemon_hold_notice(log: ActionLog, node: str, lemon: Mapping[str, Any]) -> dict[str, Any]:
    """The on-call message of a held uncordon (``acme.notify``'s message shape). Its id names the node and the
    lemon list's day, so the hourly runs that hold the node again queue it once per list."""
    import json

    cluster, day = log.cluster, lemon["as_of"]
    conf = {"cluster": cluster, "nodes": [node], "allow_lemon": True, "dry_run": False}
    lines = [
        f"{node} of {cluster} passed every check of validation {log.recovery_id}, but it stays cordoned: the "
        f"lemon-node list of {day} ranks it #{lemon['rank']} (score {lemon['score']:.2f}, {lemon['events']} "
        f"failure events across jobs, {float(lemon.get('gpu_hours_lost') or 0):.1f} GPU-hours lost, the last "
        f"on {lemon.get('last_failure')}). One passed self-test does not clear a node that keeps failing.",
        "",
        "To return it on purpose (after a repair or a closer look):",
        f"    airflow dags trigger validate_nodes -c '{json.dumps(conf)}'",
        "",
        f"The node's action log: {log.lake.url(log.key)}",
        f"The lemon list: {log.lake.url(lemon['list'])}",
    ]
    return {
        "id": f"lemon-hold-{cluster}-{node}-{day}",
        "kind": "lemon_hold",
        "cluster": cluster,
        "date": day,
        "recipient": "oncall",
        "subject": f"[acme] {cluster}: lemon node {node} passed validation; uncordon held",
        "text": "\n".join(lines) + "\n",
        "jobs": [],
        "nodes": [node],
    }


def summarize_outcomes(outcomes: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The run's manifest: nodes returned to service, nodes kept cordoned with the checks they failed, lemon
    nodes whose uncordon was held (with the reason) and flagged ones a run let through."""
    return {
        "validated": len(outcomes),
        "uncordoned": sorted(f"{o['cluster']}/{o['node']}" for o in outcomes if o.get("uncordoned")),
        "kept_cordoned": {
            f"{o['cluster']}/{o['node']}": o["failed_checks"] for o in outcomes if not o["passed"]
        },
        "planned_uncordon": sorted(f"{o['cluster']}/{o['node']}" for o in outcomes if o.get("planned")),
        "held_lemon": {f"{o['cluster']}/{o['node']}": o["held"] for o in outcomes if o.get("held")},
        "allowed_lemon": sorted(f"{o['cluster']}/{o['node']}" for o in outcomes if o.get("allowed_by")),
    }
