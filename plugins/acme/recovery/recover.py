"""A recovery after a training crash, as plain steps the ``recover_training`` DAG calls in order.

open (check the request, the job and the nodes; one recovery per job) → ``read_flight_recorder`` (when
the request names the hung job's Flight Recorder dumps) → round 1 and round 2 of the all-gather check (one call of ``check_world`` per world; on Kubernetes the DAG runs the worlds as
pods instead) → ``decide_faults`` → ``take_out_faulty`` (blast-radius limit, then cordon/drain each
faulty node once) → ``choose_restart_checkpoint`` → ``restart_job`` (resume-from, skip-batches,
drained nodes excluded; detection-to-restart time) → ``close_recovery``.

Every step is recorded in the action log (``acme.recovery.actions``). A **dry run** records every
step with what it would do and touches no cluster: no check pod or srun, no cordon, no restart (the
checkpoint choice, which only reads the object store, runs for real). A re-run of the same recovery
finds its earlier cordons and restart in the log and does not repeat them.

**Flight Recorder dumps** (``acme.recovery.flight_recorder``, the request's ``flight_recorder_uri``): when
they are conclusive (every rank dumped, and the ranks that never entered the stuck collective, or entered a
mismatched one, are a minority placed on nodes of the job), the verdict is theirs: the blamed nodes are
faulty, round 1 plans no world (the two-round all-gather test is skipped) and the ``flight_recorder`` step
of the action log says why. When they are not (or cannot be read), that step says why and the two rounds
run as without dumps. Reading them touches no cluster, so a dry run reads them for real too.

Stragglers are reported (in the verdict and the log) but not cordoned: a slow node slows the job
without crashing it, and taking it out is a capacity decision for a person.

A person is needed — ``NeedsPersonError`` with the reason — when the nodes to cordon exceed the
blast-radius limit, when no checkpoint is healthy, or when the check left nodes undecided (restarting
beside a node that may be faulty would crash the job again).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from acme.errors import AcmeError, InputError
from acme.recovery.actions import ActionLog, acquire_job, checked_name, release_job, utc_now
from acme.recovery.backend import JobInfo, RestartPlan
from acme.recovery.blast_radius import BlastRadiusLimit, CordonDecision, check_blast_radius
from acme.recovery.localize import Localization, WorldResult, decide, plan_round1, plan_round2
from acme.recovery.request import RecoveryRequest

if TYPE_CHECKING:
    from acme.lake import Lake
    from acme.recovery.backend import RecoveryBackend
    from acme.settings import RecoverySettings


class NeedsPersonError(AcmeError):
    """Recovery stopped on purpose: the message says what a person has to decide."""

    recovery_status = "needs-person"

    def __init__(self, problem: str):
        self.problem = problem
        super().__init__(f"needs a person: {problem}")


def action_log(lake: Lake, request: RecoveryRequest) -> ActionLog:
    return ActionLog(lake, request.cluster, request.job_id, request.recovery_id)


def request_from_run(
    lake: Lake, params: Mapping[str, Any], run_id: str, started: datetime
) -> RecoveryRequest:
    """The checked request of a run: its Params (or the diagnosis' conf), keyed on ``recovery_id`` (default
    the run id); an empty ``checkpoint_uri`` is found by ``acme.recovery.checkpoint_location`` (the
    cluster's configuration, then ``ACME_CHECKPOINT_URI_PATTERN``; ``{lake}`` is this lake), and so is an
    empty ``flight_recorder_uri`` (the cluster's ``flight_recorder_uri_pattern``, then
    ``ACME_FLIGHT_RECORDER_URI_PATTERN``; neither: no dumps).

    A request that cannot be made (a bad Param, an unreadable cluster configuration or pattern) is
    still recorded, as a failed ``request`` step of the action log, when the cluster, job id and
    recovery id can name one; then the error is raised.
    """
    from acme.errors import ConfigError
    from acme.recovery.actions import SAFE_NAME, recovery_id_from_run
    from acme.recovery.checkpoint_location import checkpoint_location, flight_recorder_location

    recovery_id = params.get("recovery_id") or recovery_id_from_run(run_id)
    cluster, job_id = params.get("cluster"), str(params.get("job_id") or "")
    try:
        location = dumps = None
        if not (params.get("checkpoint_uri") or "").strip():
            location = checkpoint_location(
                checked_name(cluster, "cluster"), checked_name(job_id, "job_id"), lake.uri
            )
        if not str(params.get("flight_recorder_uri") or "").strip():
            dumps = flight_recorder_location(
                checked_name(cluster, "cluster"), checked_name(job_id, "job_id"), lake.uri
            )
        return RecoveryRequest.from_params(
            params, recovery_id, run_id, started,
            default_checkpoint=location.uri if location else None,
            default_from=location.source if location else "ACME_CHECKPOINT_URI_PATTERN",
            default_dumps=(dumps.uri, dumps.source) if dumps else None,
        )  # fmt: skip
    except (InputError, ConfigError) as exc:
        names = (cluster, job_id, recovery_id)
        if all(isinstance(n, str) and SAFE_NAME.match(n) and ".." not in n for n in names):
            now = utc_now()
            ActionLog(lake, str(cluster), job_id, str(recovery_id)).append(
                {"step": "request", "idempotency_key": None, "dry_run": bool(params.get("dry_run")),
                 "inputs": {"params": dict(params), "run_id": run_id}, "started_at": now, "ended_at": now,
                 "seconds": 0.0, "status": "failed", "error": f"{type(exc).__name__}: {exc}", "result": {}}
            )  # fmt: skip
        raise


# --- the steps ----------------------------------------------------------------------------------


def open_recovery(
    lake: Lake, request: RecoveryRequest, backend: RecoveryBackend, settings: RecoverySettings
) -> dict[str, Any]:
    """Check the job and its nodes with the cluster, hold the job's marker, plan round 1.

    Nodes already out of scheduling are not checked (a check pinned to a cordoned or drained node
    would wait for it for ever); a re-run of the same recovery keeps the plan it made the first time.
    """
    log = action_log(lake, request)
    earlier = None if request.dry_run else log.done("open")
    inputs = {"request": request.to_dict(), "backend": backend.name}
    with log.step("open", inputs, request.dry_run, "open") as result:
        job = backend.describe_job(request.job_id)
        strangers = [node for node in request.nodes if node not in set(job.nodes)]
        if strangers:
            raise InputError(
                "nodes",
                f"{', '.join(strangers)} did not run job {request.job_id} (the cluster lists "
                f"{', '.join(job.nodes)}): nothing is checked or cordoned on a node outside the job",
            )
        if not request.dry_run:
            acquire_job(
                lake,
                request.cluster,
                request.job_id,
                request.recovery_id,
                request.run_id,
                settings.lock_ttl_s,
            )
        if earlier is not None:
            worlds, out = earlier["result"]["round1"], earlier["result"]["not_checked"]
        else:
            out = sorted(backend.cordoned(list(request.nodes)))
            to_check = [node for node in request.nodes if node not in set(out)]
            if not to_check:
                raise NeedsPersonError(f"every node of job {request.job_id} is already out of scheduling")
            worlds = plan_round1(to_check)
        result.update(job_nodes=list(job.nodes), round1=worlds, not_checked=out, action_log=lake.url(log.key))
    dumps = read_flight_recorder(lake, request)
    return {
        "request": request.to_dict(),
        "job": {"job_id": job.job_id, "nodes": list(job.nodes), "spec": job.spec},
        "round1": [] if dumps and dumps["conclusive"] else worlds,
        "flight_recorder": dumps,
        "action_log": lake.url(log.key),
    }


FLIGHT_RECORDER_STEP = "flight_recorder"


def read_flight_recorder(lake: Lake, request: RecoveryRequest) -> dict[str, Any] | None:
    """The verdict of the request's Flight Recorder dumps, recorded with what it means for the two-round
    check; None when the request names no dumps. Dumps that cannot be read are an inconclusive verdict
    (the error says which file and why), never a failed recovery: the check then runs as without them.
    A re-run reuses the verdict it recorded."""
    from acme.recovery.flight_recorder import NoDumps, analyse, read_dump_folder
    from acme.recovery.request import FLIGHT_RECORDER_PARAM

    if not request.flight_recorder_uri:
        return None
    log = action_log(lake, request)
    earlier = None if request.dry_run else log.done(FLIGHT_RECORDER_STEP)
    if earlier is not None:
        return dict(earlier["result"]["verdict"])
    inputs = {"flight_recorder_uri": request.flight_recorder_uri, "from": request.flight_recorder_from,
              "nodes": list(request.nodes)}  # fmt: skip
    with log.step(FLIGHT_RECORDER_STEP, inputs, request.dry_run, FLIGHT_RECORDER_STEP) as result:
        try:
            verdict = analyse(
                read_dump_folder(request.flight_recorder_uri, request.nodes), request.nodes
            ).to_dict()
        except InputError as exc:
            # A pattern names where dumps would be for every job: most failures are no hang and write none.
            from_pattern = isinstance(exc, NoDumps) and request.flight_recorder_from != FLIGHT_RECORDER_PARAM
            why = (
                f"no dumps at {request.flight_recorder_uri} ({request.flight_recorder_from}): the job wrote none"
                if from_pattern
                else f"the dumps cannot be read: {exc}"
            )
            verdict = {
                "conclusive": False,
                "why": why,
                "faulty_nodes": [],
                "blamed": [],
                "problems": [str(exc)],
            }
        result["verdict"] = verdict
        result["two_round_check"] = (
            f"skipped: the dumps name the faulty node(s) {', '.join(verdict['faulty_nodes'])} ({verdict['why']})"
            if verdict["conclusive"]
            else f"runs: the dumps are not conclusive ({verdict['why']})"
        )
        if request.dry_run:
            result["status"] = "done"  # reading the dumps touches no cluster: the verdict is real
    return verdict


def world_from_dict(data: Mapping[str, Any]) -> WorldResult:
    """The world's result from its dict (extra keys such as ``reused`` are ignored)."""
    return WorldResult(
        tuple(data["nodes"]), bool(data["ok"]), dict(data.get("seconds") or {}), data.get("error", "")
    )


def check_key(world: Sequence[str], round_number: int) -> str:
    return f"check{round_number}:{','.join(world)}"


def earlier_check(
    lake: Lake, request: RecoveryRequest, world: Sequence[str], round_number: int
) -> dict | None:
    """The result this recovery already recorded for the world, if any (a re-run does not check again)."""
    if request.dry_run:
        return None
    done = action_log(lake, request).done(check_key(world, round_number))
    return None if done is None else {**done["result"], "reused": done["ended_at"]}


def check_world(
    lake: Lake, request: RecoveryRequest, backend: RecoveryBackend, world: Sequence[str], round_number: int
) -> dict[str, Any]:
    """Run the check on one world through the backend (recorded); a dry run only records the plan."""
    earlier = earlier_check(lake, request, world, round_number)
    if earlier is not None:
        return earlier
    log = action_log(lake, request)
    inputs = {"world": list(world), "round": round_number, "backend": backend.name}
    key = check_key(world, round_number)
    with log.step(f"check_round{round_number}", inputs, request.dry_run, key) as result:
        if request.dry_run:
            result["planned"] = True
            return {"nodes": list(world), "ok": True, "seconds": {}, "error": "", "planned": True}
        outcome = backend.run_world(list(world), round_number, request.check_id)
        result.update(outcome.to_dict())
    return outcome.to_dict()


def record_world(
    lake: Lake, request: RecoveryRequest, outcome: WorldResult, round_number: int, how: Mapping[str, Any]
) -> dict[str, Any]:
    """Record a world checked outside ``check_world`` (the Kubernetes pods of the DAG)."""
    log = action_log(lake, request)
    inputs = {"world": list(outcome.nodes), "round": round_number, **how}
    key = check_key(outcome.nodes, round_number)
    with log.step(f"check_round{round_number}", inputs, request.dry_run, key) as result:
        result.update(outcome.to_dict())
    return outcome.to_dict()


def plan_second_round(request: RecoveryRequest, round1: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """Round-2 worlds from round 1's results (none in a dry run, which ran no check, nor when round 1 ran
    no world: the Flight Recorder dumps named the faulty nodes)."""
    if request.dry_run or not round1 or any(r.get("planned") for r in round1):
        return []
    return plan_round2([world_from_dict(r) for r in round1])


def decide_faults(
    lake: Lake,
    request: RecoveryRequest,
    round1: Sequence[Mapping[str, Any]],
    round2: Sequence[Mapping[str, Any]],
    flight_recorder: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The two rounds' verdict (faulty, stragglers, undecided with reasons), recorded; or, when the Flight
    Recorder dumps were conclusive (``flight_recorder``, from ``read_flight_recorder``), theirs."""
    log = action_log(lake, request)
    if flight_recorder and flight_recorder.get("conclusive"):
        return _decide_from_dumps(log, request, flight_recorder)
    with log.step("decide", {"round1": list(round1), "round2": list(round2)}, request.dry_run) as result:
        if request.dry_run:
            result["planned"] = "a dry run runs no check, so nothing is decided"
            return {"faulty": [], "stragglers": [], "undecided": [], "dry_run": True}
        found: Localization = decide(
            [world_from_dict(r) for r in round1], [world_from_dict(r) for r in round2]
        )
        result.update(found.to_dict(evidence=False))
    return found.to_dict(evidence=False)


def _decide_from_dumps(log: ActionLog, request: RecoveryRequest, dumps: Mapping[str, Any]) -> dict[str, Any]:
    """The dumps' verdict as recovery's: their blamed nodes are faulty, with the ranks' reasons per node
    (real in a dry run too: reading the dumps touches no cluster)."""
    why: dict[str, list[str]] = {}
    for blamed in dumps.get("blamed") or []:
        why.setdefault(blamed["node"], []).append(
            f"rank {blamed['rank']} {blamed['problem']} {blamed['detail']}"
        )
    verdict = {"faulty": list(dumps["faulty_nodes"]), "stragglers": [], "undecided": [], "worlds_launched": 0,
               "source": "flight_recorder", "why": {node: "; ".join(lines) for node, lines in why.items()}}  # fmt: skip
    inputs = {"source": "flight_recorder", "flight_recorder_uri": request.flight_recorder_uri}
    with log.step("decide", inputs, request.dry_run) as result:
        result.update(verdict)
    return verdict


def blast_radius_of(
    log: ActionLog,
    backend: RecoveryBackend,
    faulty: Sequence[str],
    job_nodes: Sequence[str],
    limit: BlastRadiusLimit,
) -> tuple[list[str], set[str], CordonDecision]:
    """The faulty nodes still to cordon, those already out of scheduling, and the blast-radius decision."""
    done_before = [node for node in faulty if log.done(f"cordon:{node}")]
    already = backend.cordoned(list(job_nodes)) if faulty else set()
    to_cordon = [node for node in faulty if node not in already and node not in done_before]
    return (
        to_cordon,
        already,
        check_blast_radius(to_cordon, len(job_nodes), limit, already_cordoned=len(already)),
    )


def take_out_faulty(
    lake: Lake,
    request: RecoveryRequest,
    backend: RecoveryBackend,
    verdict: Mapping[str, Any],
    job_nodes: Sequence[str],
    limit: BlastRadiusLimit,
) -> dict[str, Any]:
    """Cordon/drain the faulty nodes once each, within the blast-radius limit; else NeedsPersonError."""
    log = action_log(lake, request)
    faulty = list(verdict.get("faulty") or [])
    with log.step("blast_radius", {"faulty": faulty, "job_nodes": len(job_nodes)}, request.dry_run) as result:
        _, already, decision = blast_radius_of(log, backend, faulty, job_nodes, limit)
        result.update(allowed=decision.allowed, reason=decision.reason, limit=decision.limit,
                      already_cordoned=sorted(already))  # fmt: skip
        if not decision.allowed:
            raise NeedsPersonError(
                f"{decision.reason}; nodes the check blamed: {', '.join(faulty)} (job {request.job_id})"
            )
    cordoned = []
    for node in faulty:
        key = f"cordon:{node}"
        earlier = log.done(key)
        if earlier is not None:
            cordoned.append({"node": node, "skipped": f"already done at {earlier['ended_at']}"})
            continue
        reason = f"acme recovery {request.recovery_id} of job {request.job_id}: " + (
            f"named by the Flight Recorder dumps: {verdict['why'][node]}"
            if verdict.get("source") == "flight_recorder" and node in (verdict.get("why") or {})
            else "failed the all-gather check twice"
        )
        with log.step("cordon", {"node": node, "reason": reason}, request.dry_run, key) as result:
            if request.dry_run:
                result["planned"] = f"would cordon {node} through {backend.name}"
            else:
                result.update(backend.cordon(node, reason))
        cordoned.append({"node": node, **result})
    return {"cordoned": cordoned, "excluded": faulty}


def choose_restart_checkpoint(lake: Lake, request: RecoveryRequest) -> dict[str, Any]:
    """The checkpoint to resume from and the batches to skip; NeedsPersonError when none is healthy."""
    from acme.lake import open_lake
    from acme.recovery.checkpoints import NeedsOperatorError, choose_checkpoint_in_lake

    log = action_log(lake, request)
    inputs = {"checkpoint_uri": request.checkpoint_uri, "checkpoint_from": request.checkpoint_from,
              "metrics_file": request.metrics_file}  # fmt: skip
    with log.step("choose_checkpoint", inputs, request.dry_run) as result:
        # On the lake's S3 service (the default location, {lake}/checkpoints/...), with the lake's own
        # credentials and endpoint: inside Airflow those come from its connection, not the environment.
        on_s3 = request.checkpoint_uri.startswith("s3://") and lake.uri.startswith("s3://")
        store = open_lake(request.checkpoint_uri, lake.storage_options if on_s3 else None)
        try:
            choice = choose_checkpoint_in_lake(store, "", metrics_key=request.metrics_file)
        except NeedsOperatorError as exc:
            problem = (
                f"{str(exc).removesuffix(': a person must decide how to restart')} (checkpoint location "
                f"{request.checkpoint_uri}, from {request.checkpoint_from}: set it there, or the "
                f"checkpoint_uri Param)"
            )
            if not request.dry_run:
                raise NeedsPersonError(problem) from exc
            # A dry run goes on to the restart plan, which says that a live run would stop here.
            result["planned"] = f"a live run would stop here: needs a person: {problem}"
            return {"path": None, "step": None, "skip_batches": [], "missing": problem}
        result.update(choice.to_dict())
        if request.dry_run:
            result["status"] = "done"  # reading the object store touches no cluster: the choice is real
    return choice.to_dict()


def restart_job(
    lake: Lake,
    request: RecoveryRequest,
    backend: RecoveryBackend,
    job: Mapping[str, Any],
    verdict: Mapping[str, Any],
    taken_out: Mapping[str, Any],
    checkpoint: Mapping[str, Any],
    planned_because: str | None = None,
) -> dict[str, Any]:
    """Resubmit the job once (resume-from, skip-batches, drained nodes excluded); detection-to-restart time.
    A dry-run ``request`` records the plan; ``planned_because`` says why it is one (default: a dry run)."""
    log = action_log(lake, request)
    undecided = verdict.get("undecided") or []
    plan = RestartPlan(
        recovery_id=request.recovery_id,
        resume_from=checkpoint["path"] or "",
        resume_step=int(checkpoint["step"] or 0),
        skip_batches=tuple((r["first"], r["last"]) for r in checkpoint.get("skip_batches") or []),
        exclude_nodes=tuple(taken_out.get("excluded") or ()),
    )
    earlier = log.done("restart")
    if earlier is not None:
        return {**earlier["result"], "skipped": f"already restarted at {earlier['ended_at']}"}
    with log.step(
        "restart", {"plan": asdict(plan), "undecided": undecided}, request.dry_run, "restart"
    ) as result:
        if undecided:
            shown = "; ".join(f"{u['node']}: {u['reason']}" for u in undecided)
            raise NeedsPersonError(
                f"the check could not decide about {len(undecided)} node(s), so the job is not restarted beside them ({shown})"
            )
        info = JobInfo(job["job_id"], tuple(job["nodes"]), dict(job.get("spec") or {}))
        if request.dry_run:
            source = (
                f"from {plan.resume_from} (step {plan.resume_step})"
                if plan.resume_from
                else f"but has no checkpoint to resume from ({checkpoint.get('missing')})"
            )
            excluded = f", without {', '.join(plan.exclude_nodes)}" if plan.exclude_nodes else ""
            because = planned_because or "dry run (ACME_RECOVERY_DRY_RUN / the dry_run Param)"
            result["planned"] = (
                f"{because}: would resubmit job {info.job_id} through {backend.name} {source}{excluded}"
            )
        else:
            result.update(backend.restart(info, plan))
        restarted = utc_now()
        result["restarted_at"] = restarted
        result["detection_to_restart_s"] = round(
            (
                datetime.fromisoformat(restarted) - datetime.fromisoformat(request.detected_at or restarted)
            ).total_seconds(),
            3,
        )
    return dict(result)


def close_recovery(lake: Lake, request: RecoveryRequest) -> bool:
    """Release the job's marker (a no-op for a dry run, which never took it)."""
    if request.dry_run:
        return False
    return release_job(lake, request.cluster, request.job_id, request.recovery_id)


# --- from the verdict to the restart ------------------------------------------------------------


def finish_recovery(
    lake: Lake,
    request: RecoveryRequest,
    backend: RecoveryBackend,
    opened: Mapping[str, Any],
    round1: Sequence[Mapping[str, Any]],
    round2: Sequence[Mapping[str, Any]],
    settings: RecoverySettings,
) -> dict[str, Any]:
    """From the two rounds' results to the restart: decide → choose the checkpoint → approval
    (``acme.recovery.approval``) → take out the faulty nodes (blast-radius limit, cordon or drain) →
    restart; each step its own record in the action log.

    A live recovery that must ask stops before the first cordon and returns ``awaiting_approval`` with the
    form (``approval``: subject, body, plan); :func:`restart_after_approval` goes on once it is answered.
    """
    from acme.recovery.approval import (
        AUTO_APPROVED,
        GRANTED,
        ApprovalPolicy,
        approval_form,
        approval_outcome,
        planned_actions,
        policy_decision,
        record_approval,
    )

    verdict = decide_faults(lake, request, round1, round2, opened.get("flight_recorder"))
    limit = BlastRadiusLimit(settings.max_nodes, settings.max_share)
    job_nodes = opened["job"]["nodes"]
    log = action_log(lake, request)
    decision, checkpoint = None, None
    if not request.dry_run:
        faulty = list(verdict.get("faulty") or [])
        to_cordon, _, radius = blast_radius_of(log, backend, faulty, job_nodes, limit)
        # Live, the checkpoint is chosen before any cordon: the form shows it, and a recovery without a
        # healthy one stops for a person with the cluster untouched.
        checkpoint = choose_restart_checkpoint(lake, request) if radius.allowed else None
        plan = planned_actions(verdict, to_cordon, len(job_nodes), radius, checkpoint or {})
        policy = ApprovalPolicy.from_settings(settings)
        decision = policy_decision(request, plan, policy)
        earlier = approval_outcome(log)
        if decision.ask and not (earlier and earlier["status"] in GRANTED):
            subject, body = approval_form(request, plan, policy.timeout_s)
            return {"verdict": verdict, "checkpoint": checkpoint, "awaiting_approval": True,
                    "approval": {"subject": subject, "body": body, "plan": plan.to_dict(), "why": decision.why,
                                 "timeout_s": policy.timeout_s},
                    "action_log": opened["action_log"]}  # fmt: skip
        if decision.auto:
            record_approval(log, AUTO_APPROVED, "policy", decision.why, plan)
    taken_out = take_out_faulty(lake, request, backend, verdict, job_nodes, limit)
    checkpoint = checkpoint or choose_restart_checkpoint(lake, request)
    restarted = restart_job(lake, request, backend, opened["job"], verdict, taken_out, checkpoint)
    return {"verdict": verdict, "taken_out": taken_out, "checkpoint": checkpoint, "restart": restarted,
            "awaiting_approval": False, "approval": {"why": decision.why if decision else "a dry run"},
            "action_log": opened["action_log"]}  # fmt: skip


def restart_after_approval(
    lake: Lake,
    request: RecoveryRequest,
    backend: RecoveryBackend,
    opened: Mapping[str, Any],
    finished: Mapping[str, Any],
    settings: RecoverySettings,
) -> dict[str, Any]:
    """After the approval question (``finish_recovery`` returned ``awaiting_approval``): take out and
    restart when the action log says approved; otherwise (rejected, timed out, never answered) record the
    cordons and the restart as a plan: nothing on the cluster changes without an approval."""
    from acme.recovery.approval import GRANTED, approval_outcome

    outcome = approval_outcome(action_log(lake, request))
    limit = BlastRadiusLimit(settings.max_nodes, settings.max_share)
    verdict, job = finished["verdict"], opened["job"]
    because = None
    if outcome is None or outcome["status"] not in GRANTED:
        status = outcome["status"] if outcome else "not answered"
        who = f" by {outcome['by']}" if outcome and outcome.get("by") else ""
        why = f": {outcome['reason']}" if outcome and outcome.get("reason") else ""
        because = f"not approved ({status}{who}{why}), so the recovery ends as a plan"
        request = replace(request, dry_run=True)
    taken_out = take_out_faulty(lake, request, backend, verdict, job["nodes"], limit)
    checkpoint = finished["checkpoint"]  # chosen before the question (the one the form showed)
    restarted = restart_job(lake, request, backend, job, verdict, taken_out, checkpoint, because)
    return {"verdict": verdict, "taken_out": taken_out, "checkpoint": checkpoint, "restart": restarted,
            "approval": outcome, "action_log": opened["action_log"]}  # fmt: skip
