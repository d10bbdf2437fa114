"""The recovery request: one typed hand-off from the diagnosis to ``recover_training`` and its steps.

The diagnosis (``acme.diagnosis.routing``) builds a :class:`RecoveryRequest` for an infrastructure failure
of a training job and sends its :meth:`~RecoveryRequest.to_conf` as the run's conf; ``recover_training``
declares its Params from :func:`conf_schema` (the same JSON schema, so a conf the diagnosis builds is
always one the DAG accepts); ``acme.recovery.recover.request_from_run`` checks the run's Params once with
:meth:`RecoveryRequest.from_params`; the tasks after it get the checked request back from the opened
recovery's manifest with :func:`opened_request`.

Conf fields (the Params of ``recover_training``): ``cluster``, ``job_id``, ``nodes`` (rank order),
``checkpoint_uri`` ("" = found by the cluster's configuration or ``ACME_CHECKPOINT_URI_PATTERN``),
``metrics_file``, ``dry_run``, ``reason``, ``recovery_id``, ``detected_at``, ``flight_recorder_uri`` (where
the hung job's PyTorch Flight Recorder dumps are: ``acme.recovery.flight_recorder``), and what the diagnosis found
(``diagnosis_source``, ``confidence``, ``evidence``), which the approval form shows and the auto-approve
policy reads (``acme.recovery.approval``). Fields only a checked request has: ``run_id``,
``checkpoint_from`` (where the checkpoint location came from, for error messages) and
``flight_recorder_from`` (the same for the dumps: the Param, or the cluster's or the setting's pattern,
``acme.recovery.checkpoint_location.flight_recorder_location``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from datetime import UTC, datetime
from typing import Any

from acme.errors import InputError

FLIGHT_RECORDER_PARAM = "the flight_recorder_uri Param"

DIAGNOSIS_SOURCES = ("rule", "retrieval", "llm", "operator", "manual")
"""Who decided the failure a recovery is started for; ``manual`` for a run started by hand."""
MAX_EVIDENCE_LINES = 5
_RECOVERY_ID_PATTERN = "^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"


def conf_schema(dry_run_default: bool) -> dict[str, Any]:
    """The JSON schema of a recovery conf, field by field (``recover_training`` makes its Params from it).

    Each value is a JSON-schema property with ``title`` and ``description``; a ``default`` key is absent for
    the fields a run must give (``job_id``, ``nodes``). ``dry_run_default`` is ``ACME_RECOVERY_DRY_RUN``.
    """
    return {
        "cluster": {"default": "seren", "type": "string", "title": "Cluster",
                    "description": "The cluster the job ran on."},
        # No defaults for the job: a trigger without edits must not recover some job by accident.
        "job_id": {"type": "string", "minLength": 1, "title": "Job id",
                   "description": "The crashed job (required): as the cluster's scheduler names it."},
        "nodes": {"type": "array", "items": {"type": "string"}, "minItems": 1, "title": "Nodes",
                  "description": "The job's nodes in rank order (required)."},
        "checkpoint_uri": {
            "default": "", "type": "string", "title": "Checkpoint location",
            "description": "Folder or s3:// prefix holding the job's step_<N>/ checkpoints; empty = the "
            "cluster's checkpoint_uri_pattern in clusters.yaml, else ACME_CHECKPOINT_URI_PATTERN "
            "(default {lake}/checkpoints/cluster={cluster}/job={job_id}).",
        },
        "metrics_file": {
            "default": None, "type": ["null", "string"], "title": "Training metrics",
            "description": "Metrics file (CSV or JSON lines, step/loss) relative to the checkpoint location.",
        },
        "dry_run": {
            "default": dry_run_default, "type": "boolean", "title": "Dry run",
            "description": "Record every step, touch nothing. Default: ACME_RECOVERY_DRY_RUN (true unless set "
            "to false), the same setting the diagnosis uses for the recoveries it starts. A live run asks for "
            "approval before it cordons, drains or restarts, unless the auto-approve policy allows it "
            "(docs/approvals.md).",
        },
        "reason": {"default": "", "type": "string", "title": "Reason",
                   "description": "Why recovery was started (the diagnosis' failure reason)."},
        "recovery_id": {
            "default": None, "type": ["null", "string"], "pattern": _RECOVERY_ID_PATTERN, "title": "Recovery id",
            "description": "Names this recovery (e.g. the diagnosis' incident id): runs with the same id are "
            "re-runs of one recovery and never cordon or restart twice. Default: the run id.",
        },
        "detected_at": {
            "default": None, "type": ["null", "string"], "title": "Detected at",
            "description": "When the crash was detected (ISO 8601); default the run's start.",
        },
        "diagnosis_source": {
            "default": "manual", "type": "string", "enum": list(DIAGNOSIS_SOURCES), "title": "Diagnosed by",
            "description": "Who decided the failure: a rule, retrieval of past cases, the LLM agent, an "
            "operator's triage answer, or manual (started by hand). The auto-approve policy reads it.",
        },
        "confidence": {
            "default": None, "type": ["null", "number"], "minimum": 0, "maximum": 1, "title": "Confidence",
            "description": "The diagnosis' confidence (0-1), shown on the approval form.",
        },
        "flight_recorder_uri": {
            "default": "", "type": "string", "title": "Flight Recorder dumps",
            "description": "Folder or s3:// prefix holding the hung job's PyTorch Flight Recorder dumps, one "
            "file per rank (TORCH_FR_DUMP_TEMP_FILE). When they name the ranks that never entered the stuck "
            "collective (and so their nodes), the two-round check is skipped; otherwise the action log says why "
            "and the check runs. Empty: where the cluster's flight_recorder_uri_pattern in clusters.yaml, else "
            "ACME_FLIGHT_RECORDER_URI_PATTERN, puts them; neither set: no dumps (docs/flight_recorder.md).",
        },
        "evidence": {
            "default": [], "type": "array", "items": {"type": "string"}, "maxItems": MAX_EVIDENCE_LINES,
            "title": "Evidence lines",
            "description": "The log lines the diagnosis rests on (shown on the approval form).",
        },
    }  # fmt: skip


def conf_json_schema(dry_run_default: bool = True) -> dict[str, Any]:
    """The whole conf as one JSON-schema object (for validating a conf outside Airflow)."""
    properties = conf_schema(dry_run_default)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "acme recovery request",
        "type": "object",
        "properties": properties,
        "required": [name for name, spec in properties.items() if "default" not in spec],
        "additionalProperties": False,
    }


@dataclass(frozen=True)
class RecoveryRequest:
    """What a recovery is asked to do (module docstring); a request from :meth:`from_params` is checked."""

    cluster: str
    job_id: str
    nodes: tuple[str, ...]
    checkpoint_uri: str
    recovery_id: str
    run_id: str = ""
    metrics_file: str | None = None
    dry_run: bool = False
    reason: str = ""
    detected_at: str | None = None
    checkpoint_from: str = "the checkpoint_uri Param"  # where the location came from, for error messages
    diagnosis_source: str = "manual"
    confidence: float | None = None
    evidence: tuple[str, ...] = ()
    flight_recorder_uri: str = ""  # the hung job's Flight Recorder dumps ("" = none)
    flight_recorder_from: str = FLIGHT_RECORDER_PARAM  # where that location came from

    @classmethod
    def from_params(
        cls,
        params: Mapping[str, Any],
        recovery_id: str,
        run_id: str,
        started: datetime,
        default_checkpoint: str | None = None,
        default_from: str = "ACME_CHECKPOINT_URI_PATTERN",
        default_dumps: tuple[str, str] | None = None,
    ) -> RecoveryRequest:
        """Checked request from run Params; ``detected_at`` defaults to ``started`` (the run's start), an
        empty ``checkpoint_uri`` to ``default_checkpoint`` (found by ``default_from``, the setting named
        when no healthy checkpoint is there) and an empty ``flight_recorder_uri`` to ``default_dumps``
        (the location and the setting that gave it)."""
        from acme.recovery.actions import checked_metrics_file, checked_name

        nodes = _checked_nodes(params.get("nodes"))
        checkpoint = params.get("checkpoint_uri")
        checkpoint_from = "the checkpoint_uri Param"
        if (
            checkpoint is None or (isinstance(checkpoint, str) and not checkpoint.strip())
        ) and default_checkpoint:
            checkpoint, checkpoint_from = default_checkpoint, default_from
        if not isinstance(checkpoint, str) or not checkpoint.strip():
            raise InputError("checkpoint_uri", "missing: where the job's checkpoints are (folder or s3://…)")
        detected = params.get("detected_at") or started.astimezone(UTC).isoformat()
        _check_aware(detected)
        dumps_uri, dumps_from = _dumps_location(params, default_dumps)
        return cls(
            cluster=checked_name(params.get("cluster"), "cluster"),
            job_id=checked_name(str(params.get("job_id") or ""), "job_id"),
            nodes=nodes,
            checkpoint_uri=checkpoint.strip(),
            recovery_id=checked_name(recovery_id, "recovery_id"),
            run_id=run_id,
            metrics_file=checked_metrics_file(params["metrics_file"]) if params.get("metrics_file") else None,
            dry_run=bool(params.get("dry_run")),
            reason=str(params.get("reason") or ""),
            detected_at=str(detected),
            checkpoint_from=checkpoint_from,
            flight_recorder_uri=dumps_uri,
            flight_recorder_from=dumps_from,
            **_checked_diagnosis(params),
        )

    def to_conf(self) -> dict[str, Any]:
        """The run conf of this request (``recover_training``'s Params); optional fields left unset are
        left out, so the DAG's defaults apply."""
        conf: dict[str, Any] = {
            "cluster": self.cluster,
            "job_id": self.job_id,
            "nodes": list(self.nodes),
            "checkpoint_uri": self.checkpoint_uri,
            "dry_run": self.dry_run,
            "reason": self.reason,
            "recovery_id": self.recovery_id,
        }
        optional = {"metrics_file": self.metrics_file, "detected_at": self.detected_at,
                    "confidence": self.confidence, "flight_recorder_uri": self.flight_recorder_uri or None}  # fmt: skip
        conf.update({name: value for name, value in optional.items() if value is not None})
        if self.diagnosis_source != "manual":
            conf["diagnosis_source"] = self.diagnosis_source
        if self.evidence:
            conf["evidence"] = list(self.evidence)
        return conf

    def to_dict(self) -> dict[str, Any]:
        """Every field, JSON-ready (the opened recovery's manifest carries it from task to task)."""
        return {**asdict(self), "nodes": list(self.nodes), "evidence": list(self.evidence)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RecoveryRequest:
        """The request :meth:`to_dict` wrote (unknown keys refused: a manifest of another version)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise InputError("recovery request", f"unknown fields {', '.join(unknown)}")
        return cls(**{**data, "nodes": tuple(data["nodes"]), "evidence": tuple(data.get("evidence") or ())})

    @property
    def check_id(self) -> str:
        """Names this recovery's check pods and jobs (short, stable across retries)."""
        return hashlib.sha256(f"{self.cluster}|{self.job_id}|{self.recovery_id}".encode()).hexdigest()[:12]


def opened_request(opened: Mapping[str, Any]) -> RecoveryRequest:
    """The checked request inside an opened recovery's manifest (``acme.recovery.recover.open_recovery``):
    the one way the tasks after ``open_recovery`` get it back."""
    return RecoveryRequest.from_dict(opened["request"])


def _checked_nodes(nodes: Any) -> tuple[str, ...]:
    from acme.recovery.actions import checked_name

    if isinstance(nodes, str):
        nodes = [part.strip() for part in nodes.replace("\n", ",").split(",") if part.strip()]
    if not isinstance(nodes, list | tuple) or not nodes:
        raise InputError("nodes", "empty node list: give the crashed job's nodes in rank order")
    for node in nodes:
        checked_name(node, "node name")
    if len(set(nodes)) != len(nodes):
        raise InputError("nodes", "a node is listed twice")
    return tuple(nodes)


def _dumps_location(params: Mapping[str, Any], default: tuple[str, str] | None) -> tuple[str, str]:
    """The dumps' location and where it came from: the Param, else ``default`` (a pattern's)."""
    given = _checked_location(params.get("flight_recorder_uri"), "flight_recorder_uri")
    return (given, FLIGHT_RECORDER_PARAM) if given or default is None else default


def _checked_location(value: Any, what: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InputError(what, f"{value!r} is not a folder or s3:// prefix")
    return value.strip()


def _check_aware(detected: Any) -> None:
    try:
        aware = datetime.fromisoformat(str(detected)).tzinfo is not None
    except ValueError:
        raise InputError("detected_at", f"{detected!r} is not an ISO 8601 time") from None
    if not aware:
        raise InputError(
            "detected_at", f"{detected!r} has no time zone (write e.g. 2026-11-29T14:00:00+00:00)"
        )


def _checked_diagnosis(params: Mapping[str, Any]) -> dict[str, Any]:
    """``diagnosis_source``, ``confidence`` and ``evidence`` of run Params, checked (absent: a manual run)."""
    source = params.get("diagnosis_source") or "manual"
    if source not in DIAGNOSIS_SOURCES:
        raise InputError("diagnosis_source", f"{source!r} is not one of {', '.join(DIAGNOSIS_SOURCES)}")
    confidence = params.get("confidence")
    if confidence is not None:
        if (
            isinstance(confidence, bool)
            or not isinstance(confidence, int | float)
            or not 0 <= confidence <= 1
        ):
            raise InputError("confidence", f"{confidence!r} is not a number between 0 and 1")
        confidence = float(confidence)
    evidence = params.get("evidence") or []
    if not isinstance(evidence, list | tuple) or not all(isinstance(line, str) for line in evidence):
        raise InputError("evidence", "must be a list of log lines")
    return {"diagnosis_source": source, "confidence": confidence,
            "evidence": tuple(line[:500] for line in evidence[:MAX_EVIDENCE_LINES])}  # fmt: skip
