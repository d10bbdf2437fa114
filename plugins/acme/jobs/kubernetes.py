"""Kubernetes Pods, batch/v1 Jobs and training workloads into the canonical job record.

Input
    ``kubectl get pods,jobs -o json`` (a ``List``; also one printed without its ``kind``, or
    ``kind: null``: read as the list of its items, noted), a ``PodList``/``JobList`` as the API
    returns it (items without ``kind`` take it from the list kind), a bare JSON list of
    objects, a single object, JSON Lines (one object per line, as exporters and
    ``kubectl get -w -o json --output-watch-events`` write them; ``{"type": ..., "object":
    {...}}`` watch events are unwrapped), or pretty-printed objects one after another (as
    ``kubectl get -w -o json`` prints them; ``source_line`` is the line an object starts on).
    Bytes must be UTF-8 (a BOM is dropped).

What is a job
    A batch Job is the job; its Pods (``ownerReferences`` kind Job, else the labels
    ``batch.kubernetes.io/job-name``/``job-name`` with ``controller-uid``) are folded into it
    and give node names, exit codes and OOM kills. Pods of a training-operator workload
    (owner kind PyTorchJob, MPIJob, TFJob, XGBoostJob, PaddleJob, MXJob, JAXJob or Run:ai
    RunaiJob, else the label ``training.kubeflow.org/job-name``) are folded into one job named
    after the workload. Any other Pod is its own job. The same object seen several times (a
    watch stream, or a day's extract holding several snapshots) is folded into its latest
    snapshot (highest ``resourceVersion``, else the last one in the file). ``rows_in`` counts
    records after this folding, as the Slurm parser counts jobs after folding steps:
    ``rows_in == len(jobs) + len(rejects)``.

Fields
    - ``job_id``: the ``metadata.uid`` of the job-level object (the Job, the workload owner
      as named by the pods' ``ownerReferences``/``controller-uid``, or the lone Pod). A uid
      survives name reuse (a Job deleted and re-created under the same name is a new job)
      and pods carry their Job's uid, so an extract holding only pods keys the job the same
      as one holding the Job. Without a uid (trimmed exports) the id is
      ``namespace/name`` and a note says how many.
    - ``job_name``: ``metadata.name`` of the Job/workload/Pod. ``user``: the first of the
      labels, then annotations ``acme.io/user``, ``user``, ``owner``, ``username`` on the
      job-level object, then on its pods; else the namespace (namespaces are per team/user
      on shared clusters).
    - ``gpu_num``: GPU devices per pod = sum over containers of the GPU resources
      (``nvidia.com/gpu``, ``amd.com/gpu``, HAMi ``nvidia.com/vgpu``, MIG
      ``nvidia.com/mig-*``; each a device, whole or shared), requests falling back to
      limits, init containers taken as the scheduler does (max of init vs sum of app,
      sidecars added). A Pod asking only for a Run:ai ``gpu-fraction`` annotation holds
      ``ceil(fraction)`` device (noted); one with a Run:ai MIG annotation
      (``nvidia.com/mig-1g.5gb: "1"``) holds that many instances. GPU quantities must be
      whole numbers.
    - ``gpu_share``: the physical GPUs held, where that differs from ``gpu_num``: a MIG
      instance is its compute slices out of 7 (4 on an A30), a HAMi vGPU its
      ``nvidia.com/gpucores`` percentage, a Run:ai fraction the fraction (see
      :func:`_gpu_equivalent`); null for whole GPUs.
      For a Job: template GPUs x width, width = ``min(parallelism, completions)``
      (parallelism defaults to 1, completions to parallelism; at least 1), i.e. what the
      Job holds at once; retried pods do not add up. Without the Job (pods only): the peak
      of GPUs held by pods at the same time (a running pod holds its share until now).
    - ``cpu_num``: the same for ``cpu`` requests in cores (``"500m"`` = 0.5), summed and
      then rounded up to an integer (4 x 250m = 1). Null when no container requests cpu.
    - ``node_num``/``node_list``: distinct ``spec.nodeName`` of the pods (sorted,
      comma-joined); null when no pod was scheduled or the Job came without pods.
    - times (RFC 3339, to UTC; Kubernetes' zero time ``0001-01-01`` is null):
      ``submit_time`` = ``metadata.creationTimestamp`` (pods only: earliest pod);
      ``start_time`` = Job ``status.startTime``, else the earliest container ``startedAt``
      (running or terminated, also ``lastState``), else pod ``status.startTime`` (not for a
      Pending pod: it has not started); ``end_time`` (terminal only) = Job
      ``completionTime``, else the Failed condition's ``lastTransitionTime``, else the
      latest container ``finishedAt``, else the pod's ``deletionTimestamp``.
    - ``state`` of a Pod: Succeeded -> COMPLETED (also when a container says OOMKilled with
      exit code 0: the kubelet reported success, kubernetes/kubernetes#116042, #131530;
      noted). Condition DisruptionTarget with reason DeletionByTaintManager or
      DeletionByPodGC, or ``status.reason`` NodeLost -> NODE_FAIL (the node went away);
      any other DisruptionTarget (PreemptionByScheduler, EvictionByEvictionAPI,
      TerminationByKubelet) or ``status.reason`` Evicted, Preempting, or the kubelet's
      node-shutdown ``Terminated`` -> PREEMPTED (the system stopped a healthy job; a user's
      deletion shows as ``deletionTimestamp``). Failed -> OUT_OF_MEMORY when a container
      terminated ``OOMKilled``, TIMEOUT for ``activeDeadlineSeconds`` (reason DeadlineExceeded),
      CANCELLED when deleted (``deletionTimestamp``) and the exit code is 137/143/none
      (killed by the deletion), else FAILED. Running/Pending -> CANCELLED when being
      deleted, else RUNNING: the canonical record has no PENDING, RUNNING means "not
      finished" and a null ``start_time`` marks one that never started. Any other phase
      (``Unknown``, missing) is rejected with the phase in the reason.
      ``state`` of a Job: condition Complete/SuccessCriteriaMet -> COMPLETED;
      Failed/FailureTarget with reason DeadlineExceeded -> TIMEOUT, other reasons
      (BackoffLimitExceeded, PodFailurePolicy, ...) -> FAILED, or OUT_OF_MEMORY when the
      last failed pod was OOMKilled; being deleted -> CANCELLED; else RUNNING (also
      suspended). Pods only: RUNNING while any pod runs, else the state of the pod that
      ended last (retries: the last attempt decides).
    - ``exit_code``: of the decisive pod (Pod: itself; completed Job: its last successful
      pod; other Job: its last failed pod; pods only: the pod that ended last): the first container (init containers first, then in spec order) that
      terminated non-zero, else the first app container's.
    - ``job_type``: the classifier on (job name, namespace as partition, labels, gpu_num).
    - ``source`` = ``k8s``; ``source_line`` = 1-based index of the item in the list, or the
      physical line for JSON Lines (pods-only jobs: their first pod).

``day``
    Kept for a uniform signature and ignored: a day's extract holds state updates for jobs
    submitted earlier, so every item is kept and ``skipped_other_days`` is 0.

Bad input
    Input that does not start with ``{`` or ``[`` is read as YAML (``kubectl get -o yaml``:
    one object, a ``List``, or ``---``-separated documents; ``source_line`` is then the object's
    1-based index). Objects that are not jobs (Services, ConfigMaps, PodGroups, Kueue
    ProvisioningRequests, ...) are skipped with a count per kind (``ParseResult.skipped``), not
    rejected; so are workload objects that have not started (see :func:`_parse_object`).

    Empty input, invalid JSON (the JSON error's line and column), nesting too deep for the
    parser (RecursionError), a top level that is neither a list nor a List/object, and bytes
    that are not UTF-8 raise :class:`InputError` (non-UTF-8 names the byte offset and line:
    Kubernetes serves UTF-8 only, so such bytes mean a damaged file, and decoding with
    replacement would silently change names and labels that are keys). Per item, these
    become rejects with the reason: not a JSON object; an object without ``kind``; missing metadata, name or
    creationTimestamp; bad timestamps (an RFC 3339 time needs its offset); bad, negative,
    implausibly large (> 10^6 per container) or fractional GPU quantities; bad cpu
    quantities; fields of the wrong JSON type; an unrecognised pod phase; a JSON Lines line that is not JSON; pods of a
    rejected Job (so that the job is quarantined once, with its reason, not half-built).

Workload objects
    Kubeflow training jobs (``kubeflow.org`` PyTorchJob, TFJob, MPIJob, XGBoostJob, PaddleJob,
    JAXJob), TrainJobs (``trainer.kubeflow.org``), JobSets (``jobset.x-k8s.io``), Kueue
    Workloads (``kueue.x-k8s.io``) and Volcano Jobs (``batch.volcano.sh``, :func:`_parse_volcano`)
    are jobs of their own (:func:`_parse_object`); pods of a training job or Volcano Job that is in
    the input are folded into it (nodes, exit code), found by their ``ownerReferences`` or the
    ``training.kubeflow.org/job-name`` / ``volcano.sh/job-name`` label. A later snapshot of an
    object printed without its ``spec`` or ``status.conditions`` takes them from an earlier one
    (:func:`_fill_from`).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from acme.errors import InputError
from acme.jobs.base import ParseResult, jobs_frame
from acme.rejects import record_text, rejects_frame

SOURCE = "k8s"

GPU_RESOURCES = frozenset({"nvidia.com/gpu", "amd.com/gpu", "nvidia.com/vgpu"})
GPU_RESOURCE_PREFIXES = ("nvidia.com/mig-",)
GPU_FRACTION_ANNOTATION = "gpu-fraction"  # Run:ai fractional GPU request
USER_KEYS = ("acme.io/user", "user", "owner", "username")
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
JOB_UID_LABELS = ("batch.kubernetes.io/controller-uid", "controller-uid")
WORKLOAD_NAME_LABELS = ("training.kubeflow.org/job-name", "volcano.sh/job-name")
VOLCANO_GROUP = "batch.volcano.sh"
WORKLOAD_OWNER_KINDS = frozenset(
    {"PyTorchJob", "MPIJob", "TFJob", "XGBoostJob", "PaddleJob", "MXJob", "JAXJob", "RunaiJob"}
)
# Objects that describe a job of their own (kind, API group): Kubeflow training jobs (v1) and
# TrainJobs (v2), JobSets, Kueue Workloads. See :func:`_parse_object`.
KUBEFLOW_V1_KINDS = ("PyTorchJob", "MPIJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob")
WORKLOAD_OBJECT_KINDS = frozenset(
    {(kind, "kubeflow.org") for kind in KUBEFLOW_V1_KINDS}
    | {("TrainJob", "trainer.kubeflow.org"), ("JobSet", "jobset.x-k8s.io"), ("Workload", "kueue.x-k8s.io")}
    | {("Job", VOLCANO_GROUP)}
)
# Volcano Job phases (status.state.phase, volcano-sh/apis batch/v1alpha1): the ended ones and what
# they mean; every other known phase is a job that has not ended. Terminated: stopped by Volcano
# itself for "internal factors" (a TerminateJob policy on PodFailed, ...); Aborted: stopped for
# "external factors" (a user's `vcctl job suspend`), as scancel.
VOLCANO_ENDED = {"Completed": "COMPLETED", "Failed": "FAILED", "Terminated": "FAILED", "Aborted": "CANCELLED"}
VOLCANO_NOT_ENDED = frozenset({"Pending", "Running", "Restarting", "Completing", "Terminating", "Aborting"})
_GO_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|ms|us|µs|ns|m|s)")
_GO_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
SKIP_NOT_ADMITTED = (
    "not started yet: a workload object without a start (Kueue: not admitted; a later extract carries it)"
)
SKIP_OWNED_WORKLOAD = "Kueue Workload of a job object in this input (the job object is the record)"
NODE_GONE_REASONS = frozenset({"DeletionByTaintManager", "DeletionByPodGC"})
PREEMPTED_POD_REASONS = frozenset({"Evicted", "Preempting", "Preempted", "Terminated"})
MAX_RECORD_CHARS = 65_536  # rejected records longer than this are truncated in the quarantine
MAX_QUANTITY = Decimal(10**6)  # GPUs or cores in one container beyond this are not plausible
INT32_MAX = 2**31 - 1  # exit codes, parallelism and completions are int32 in the API

_MIG_PROFILE = re.compile(r"nvidia\.com/mig-(\d+)g\.(\d+gb)(?:\+me)?")
_A30_PROFILES = frozenset({"6gb", "12gb", "24gb"})
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))([eE][+-]?\d+|[KMGTPE]i|[numkMGTPE])?$")
_SUFFIXES = {
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
    "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"),
    "P": Decimal("1e15"), "E": Decimal("1e18"),
    "Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30), "Ti": Decimal(2**40),
    "Pi": Decimal(2**50), "Ei": Decimal(2**60),
}  # fmt: skip


class _Reject(Exception):
    """One item cannot be used; the message is the reject reason."""


class _Skip(Exception):
    """One item is not a job record (another kind, a workload not admitted yet); the message is the
    reason it is counted under in ``ParseResult.skipped``."""


@dataclass
class _Raw:
    line: int
    obj: Any = None
    error: str | None = None  # set when the line itself could not be parsed (JSON Lines)
    text: str | None = None


@dataclass
class _Item:
    line: int
    kind: str  # "Pod" | "Job"
    obj: dict


@dataclass
class _Meta:
    name: str
    namespace: str
    uid: str | None
    created: datetime
    deleted: datetime | None
    labels: dict[str, str]
    annotations: dict[str, str]
    owners: list[dict]


@dataclass
class _Pod:
    line: int
    obj: dict
    meta: _Meta
    node: str | None
    state: str
    start: datetime | None
    end: datetime | None
    exit_code: int | None
    oom: bool
    oom_exit0: bool
    gpu: int
    cpu: Decimal | None
    fractional_gpu: bool
    gpu_equiv: Decimal = Decimal(0)  # physical GPUs held: gpu, or less for MIG/vGPU/fractions


@dataclass
class _Job:
    line: int
    obj: dict
    meta: _Meta
    template_gpu: int
    template_cpu: Decimal | None
    template_equiv: Decimal
    has_template: bool
    width: int
    start: datetime | None
    completion: datetime | None
    condition: tuple[str, str | None, datetime | None] | None  # (type, reason, time)


@dataclass
class _Object:
    """A workload object that is a job of its own (see :func:`_parse_object`)."""

    line: int
    kind: str
    meta: _Meta
    job_id: str | None
    state: str
    start: datetime | None
    end: datetime | None
    gpu: int | None  # None: unknown (a Volcano Job printed without its tasks)
    cpu: Decimal | None
    equiv: Decimal
    submit: datetime | None = None  # metadata.creationTimestamp (a Volcano Job may lack it: null)
    has_submit: bool = True  # False: submit_time is unknown (null), whatever ``submit`` says


@dataclass
class _Group:
    key: tuple
    kind: str  # "Job" | "workload" | "pod"
    namespace: str
    name: str
    uid: str | None
    job: _Job | None = None
    pods: list[_Pod] = field(default_factory=list)


def parse_kubernetes(
    data: bytes | str,
    cluster: str,
    *,
    source_file: str,
    day: date | None = None,
    classifier=None,
) -> ParseResult:
    """Parse a Kubernetes Pod/Job extract of one cluster; see the module docstring.

    Steps: the input's items (:meth:`_Parse.read_items`), the workload objects, the Jobs, the
    pods grouped under their owner, then one record per group or lone workload object."""
    del day  # every item is kept: see the module docstring
    if classifier is None:
        from acme.jobs.classify import load_classifier

        classifier = load_classifier()
    text = _decode(data, source_file)
    raws, list_kind, notes = _load(text, source_file)
    run = _Parse(cluster, source_file, classifier, notes)
    items = run.read_items(raws, list_kind)
    objects = run.workload_objects(items)
    run.group_pods(items, run.jobs(items))
    records = run.records(objects)
    records.sort(key=lambda r: r["source_line"])
    run.rejects.sort(key=lambda r: r["source_line"])
    frame = jobs_frame(records)
    run.finish_notes()
    return ParseResult(
        jobs=frame,
        rejects=rejects_frame(run.rejects),
        rows_in=len(records) + len(run.rejects) + sum(run.skipped.values()),
        skipped_other_days=0,
        notes=run.notes,
        skipped=run.skipped,
    )


class _Parse:
    """The state of one :func:`parse_kubernetes`: rejects, skips, notes, and the groups of pods."""

    def __init__(self, cluster: str, source_file: str, classifier: Any, notes: list[str]) -> None:
        self.cluster, self.source_file, self.classifier, self.notes = cluster, source_file, classifier, notes
        self.rejects: list[dict[str, Any]] = []
        self.skipped: dict[str, int] = {}
        self.groups: dict[tuple, _Group] = {}
        self.by_name: dict[tuple, tuple] = {}  # (namespace, family, name) -> the latest group of that name
        self.stats = {"folded": 0, "oom_exit0": 0, "fractional": 0, "no_uid": 0, "pods_only_jobs": 0}

    def reject(self, line: int, reason: str, record: Any) -> None:
        self.rejects.append(
            {"source_file": self.source_file, "source_line": line, "reason": reason, "record": _text(record)}
        )

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

    def read_items(self, raws: list[_Raw], list_kind: str | None) -> list[_Item]:
        items: list[_Item] = []
        for raw in raws:
            if raw.error is not None:
                self.reject(raw.line, raw.error, raw.text)
                continue
            try:
                items.append(_item(raw, list_kind))
            except _Reject as exc:
                self.reject(raw.line, str(exc), raw.obj)
            except _Skip as exc:
                self.skip(str(exc))
        items, superseded, filled = _latest_snapshots(items)
        if superseded:
            self.notes.append(
                f"{_n(superseded, 'older snapshot')} of an object folded into its latest snapshot"
            )
        if filled:
            self.notes.append(
                f"{_n(filled, 'latest snapshot')} printed without its spec or status.conditions took them "
                "from an older snapshot of the same object"
            )
        return items

    def workload_objects(self, items: list[_Item]) -> dict[tuple, _Object]:
        """Workload objects (Kubeflow jobs, TrainJobs, JobSets, Kueue Workloads): one record each,
        unless a Kueue Workload belongs to a job object that is in the input too (that object is
        the record)."""
        present_uids = {
            uid
            for i in items
            if (i.kind != "Object" or i.obj.get("kind") != "Workload")
            and isinstance(i.obj.get("metadata"), dict)
            if isinstance(uid := i.obj["metadata"].get("uid"), str)
        }
        objects: dict[tuple, _Object] = {}
        for item in (i for i in items if i.kind == "Object"):
            try:  # a Volcano Job is the one object of kind Job here (batch/v1 Jobs are items of their own)
                parsed = (
                    _parse_volcano(item)
                    if item.obj.get("kind") == "Job"
                    else _parse_object(item, present_uids)
                )
            except _Reject as exc:
                self.reject(item.line, str(exc), item.obj)
                continue
            except _Skip as exc:
                self.skip(str(exc))
                continue
            objects[_key(parsed.meta.uid, parsed.meta.namespace, "workload", parsed.meta.name)] = parsed
        return objects

    def jobs(self, items: list[_Item]) -> dict[tuple, str]:
        """The Jobs, each a group; returns where each rejected Job was (its pods are rejected too)."""
        jobs: list[_Job] = []
        rejected_jobs: dict[tuple, str] = {}
        for item in (i for i in items if i.kind == "Job"):
            try:
                jobs.append(_parse_job(item))
            except _Reject as exc:
                self.reject(item.line, str(exc), item.obj)
                for key in _loose_keys(item.obj):
                    rejected_jobs[key] = f"line {item.line}"

        for job in sorted(jobs, key=lambda j: j.meta.created):
            key = _key(job.meta.uid, job.meta.namespace, "Job", job.meta.name)
            self.groups[key] = _Group(key, "Job", job.meta.namespace, job.meta.name, job.meta.uid, job=job)
            self.by_name[(job.meta.namespace, "Job", job.meta.name)] = key  # the latest Job of a name
        return rejected_jobs

    def group_pods(self, items: list[_Item], rejected_jobs: dict[tuple, str]) -> None:
        """Each pod into the group of its owner (a Job or workload), or a group of its own."""
        groups, by_name, stats = self.groups, self.by_name, self.stats
        for item in (i for i in items if i.kind == "Pod"):
            owner = _pod_owner(item.obj)
            if owner is not None:
                loose: list[tuple[str, ...]] = [("uid", owner[3])] if owner[3] else []
                loose.append(("name", owner[1], owner[2]))
                hit = next((rejected_jobs[k] for k in loose if k in rejected_jobs), None)
                if owner[0] == "Job" and hit is not None:
                    self.reject(item.line, f"pod of a rejected Job {owner[1]}/{owner[2]} ({hit})", item.obj)
                    continue
            try:
                pod = _parse_pod(item)
            except _Reject as exc:
                self.reject(item.line, str(exc), item.obj)
                continue
            stats["oom_exit0"] += pod.oom_exit0
            stats["fractional"] += pod.fractional_gpu
            if owner is None:
                key = _key(pod.meta.uid, pod.meta.namespace, "Pod", pod.meta.name)
                groups.setdefault(key, _Group(key, "pod", pod.meta.namespace, pod.meta.name, pod.meta.uid))
                groups[key].pods.append(pod)
                continue
            family, namespace, name, uid = owner
            key = _key(uid, namespace, family, name)
            if key not in groups and (namespace, family, name) in by_name:
                key = by_name[(namespace, family, name)]
            if key not in groups:
                groups[key] = _Group(key, "Job" if family == "Job" else "workload", namespace, name, uid)
                by_name[(namespace, family, name)] = key
            groups[key].pods.append(pod)
            stats["folded"] += 1

    def records(self, objects: dict[tuple, _Object]) -> list[dict[str, Any]]:
        records = []
        cluster, source_file, classifier = self.cluster, self.source_file, self.classifier
        for group in self.groups.values():
            row = _row(group, cluster, source_file, classifier)
            obj = objects.pop(group.key, None) if group.kind == "workload" else None
            if obj is None and group.kind == "workload":
                obj = objects.pop(_key(None, group.namespace, "workload", group.name), None)
            if obj is not None:  # the workload object gives state, times and size; its pods the nodes
                row = {**row, **_object_row(obj, cluster, source_file, classifier), "node_num": row["node_num"],
                       "node_list": row["node_list"], "exit_code": row["exit_code"]}  # fmt: skip
            records.append(row)
            self.stats["no_uid"] += group.uid is None
            self.stats["pods_only_jobs"] += group.kind == "Job" and group.job is None
        records += [_object_row(obj, cluster, source_file, classifier) for obj in objects.values()]
        return records

    def finish_notes(self) -> None:
        stats, notes = self.stats, self.notes
        if stats["folded"]:
            notes.append(f"{_n(stats['folded'], 'pod')} folded into their Job or training workload")
        if stats["no_uid"]:
            notes.append(f"{_n(stats['no_uid'], 'job')} without metadata.uid, keyed by namespace/name")
        if stats["pods_only_jobs"]:
            notes.append(
                f"{_n(stats['pods_only_jobs'], 'Job')} seen only through their pods (the Job object is absent)"
            )
        if stats["fractional"]:
            notes.append(
                f"{_n(stats['fractional'], 'pod')} asking for a fractional GPU (gpu-fraction): gpu_num counts the "
                "device it shares, gpu_share the fraction"
            )
        if stats["oom_exit0"]:
            notes.append(
                f"{_n(stats['oom_exit0'], 'Succeeded pod')} with a container OOMKilled with exit code 0, kept COMPLETED"
            )
        for reason, count in sorted(self.skipped.items()):
            notes.append(f"{count} skipped: {reason}")


# --- reading -------------------------------------------------------------------------------


def _decode(data: bytes | str, source_file: str) -> str:
    if isinstance(data, bytes | bytearray | memoryview):
        raw = bytes(data)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = raw.count(b"\n", 0, exc.start) + 1
            raise InputError(
                source_file,
                f"not UTF-8: byte 0x{raw[exc.start]:02x} at byte offset {exc.start} ({exc.reason})",
                line,
            ) from exc
    elif isinstance(data, str):
        text = data
    else:
        raise TypeError(f"data must be bytes or str, not {type(data).__name__}")
    text = text.removeprefix("\ufeff")
    if not text.strip():
        raise InputError(source_file, "empty input: no Kubernetes objects")
    return text


def _load(text: str, source_file: str) -> tuple[list[_Raw], str | None, list[str]]:
    if text.lstrip()[:1] not in ("{", "["):
        return _load_yaml(text, source_file)
    try:
        document = json.loads(text)
    except RecursionError as exc:
        raise InputError(source_file, "JSON nested too deeply to parse (RecursionError)") from exc
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data" and text.lstrip().startswith("{"):
            first = next(line for line in text.split("\n") if line.strip())
            if _parses(first):
                return _load_lines(text), None, ["read as JSON Lines (one object per line)"]
            return _load_stream(text, source_file), None, ["read as a stream of concatenated JSON objects"]
        raise InputError(
            source_file, f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", exc.lineno
        ) from exc

    if isinstance(document, list):
        return [_Raw(i + 1, obj) for i, obj in enumerate(document)], None, []
    if isinstance(document, dict):
        if "items" in document:
            items = document["items"]
            if items is None:
                items = []
            if not isinstance(items, list):
                raise InputError(source_file, f"'items' is {_type(items)}, not a list")
            list_kind = document.get("kind") if isinstance(document.get("kind"), str) else None
            notes = ([] if items else ["the list holds no items"]) + _kindless_note(int(list_kind is None))
            return [_Raw(i + 1, obj) for i, obj in enumerate(items)], list_kind, notes
        if "kind" in document or ("type" in document and "object" in document):
            return [_Raw(1, document)], None, []
        raise InputError(
            source_file, "a JSON object without 'items' or 'kind': not a Kubernetes List or object"
        )
    raise InputError(source_file, f"expected a JSON list or a Kubernetes List object, got {_type(document)}")


def _load_yaml(text: str, source_file: str) -> tuple[list[_Raw], str | None, list[str]]:
    """YAML as ``kubectl get -o yaml`` prints it: one object, a ``List``, or several documents
    separated by ``---``. ``source_line`` is the 1-based index of the object in the file (items of
    a List counted one by one). Timestamps stay strings (they are parsed as RFC 3339 later)."""
    import yaml

    raws: list[_Raw] = []
    list_kinds: set[str] = set()
    kindless = 0  # Lists without a kind
    try:
        for document in yaml.load_all(text, Loader=_yaml_loader()):
            if document is None:
                continue
            if isinstance(document, list):
                raws += [_Raw(len(raws) + 1, obj) for obj in document]
                continue
            if not isinstance(document, dict):
                raise InputError(
                    source_file, f"expected a JSON list or a Kubernetes List object, got {_type(document)}"
                )
            if "items" in document:  # a List; older kubectl and cut excerpts print it without kind
                items = document["items"] or []
                if not isinstance(items, list):
                    raise InputError(source_file, f"'items' is {_type(items)}, not a list")
                if isinstance(document.get("kind"), str):
                    list_kinds.add(document["kind"])
                else:
                    kindless += 1
                raws += [_Raw(len(raws) + 1, obj) for obj in items]
            else:
                raws.append(_Raw(len(raws) + 1, document))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(source_file, f"neither JSON nor YAML: {problem}", line) from exc
    if not raws:
        raise InputError(source_file, "no Kubernetes objects in the YAML")
    list_kind = next(iter(list_kinds)) if len(list_kinds) == 1 and not kindless else None
    return raws, list_kind, ["read as YAML", *_kindless_note(kindless)]


def _kindless_note(lists: int) -> list[str]:
    return (
        [f"{_n(lists, 'List')} without a kind (older kubectl, or an excerpt cut before `kind: List`): "
         "read as a list of its items"]
        if lists
        else []
    )  # fmt: skip


def _yaml_loader():
    """PyYAML's safe loader (the C one when built) without the timestamp resolver."""
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class _KubernetesLoader(base):  # type: ignore[misc,valid-type]
        pass

    _KubernetesLoader.yaml_implicit_resolvers = {
        first: [r for r in resolvers if r[0] != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in base.yaml_implicit_resolvers.items()
    }
    return _KubernetesLoader


def _parses(text: str) -> bool:
    try:
        json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return False
    return True


def _load_stream(text: str, source_file: str) -> list[_Raw]:
    """Pretty-printed objects one after another, as ``kubectl get -w -o json`` prints them.

    ``source_line`` is the line each object starts on. A broken object ends the stream: there
    is no line boundary to resynchronise on, so it is an :class:`InputError`.
    """
    decoder = json.JSONDecoder()
    raws: list[_Raw] = []
    position = 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position == len(text):
            return raws
        line = text.count("\n", 0, position) + 1
        try:
            obj, position = decoder.raw_decode(text, position)
        except RecursionError as exc:
            raise InputError(source_file, "JSON nested too deeply to parse (RecursionError)", line) from exc
        except json.JSONDecodeError as exc:
            raise InputError(
                source_file, f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", exc.lineno
            ) from exc
        raws.append(_Raw(line, obj))


def _load_lines(text: str) -> list[_Raw]:
    raws = []
    for number, line in enumerate(text.split("\n"), start=1):  # not splitlines(): U+2028 may be in a string
        line = line.removesuffix("\r")
        if not line.strip():
            continue
        try:
            raws.append(_Raw(number, json.loads(line)))
        except RecursionError:
            raws.append(_Raw(number, error="JSON nested too deeply to parse (RecursionError)", text=line))
        except json.JSONDecodeError as exc:
            raws.append(_Raw(number, error=f"invalid JSON: {exc.msg} at column {exc.colno}", text=line))
    return raws


def _item(raw: _Raw, list_kind: str | None) -> _Item:
    obj = raw.obj
    if not isinstance(obj, dict):
        raise _Reject(f"not a JSON object (got {_type(obj)})")
    if "kind" not in obj and "type" in obj and isinstance(obj.get("object"), dict):
        obj = obj["object"]  # a watch event: {"type": "MODIFIED", "object": {...}}
    kind = obj.get("kind")
    if kind is None and list_kind in ("PodList", "JobList"):
        kind = list_kind.removesuffix("List")
    if kind == "Pod":
        return _Item(raw.line, "Pod", obj)
    api = obj.get("apiVersion")
    if kind == "Job" and (api is None or (isinstance(api, str) and api.startswith("batch/"))):
        return _Item(raw.line, "Job", obj)
    if not isinstance(kind, str) or not kind:
        raise _Reject(f"kind is {_type(kind)}: not a Kubernetes object")
    group = api.split("/", 1)[0] if isinstance(api, str) else None
    if (kind, group) in WORKLOAD_OBJECT_KINDS:
        return _Item(raw.line, "Object", obj)
    raise _Skip(f"not a job object: kind {kind}" + (f" ({group})" if group else ""))


def _latest_snapshots(items: list[_Item]) -> tuple[list[_Item], int, int]:
    """Keep the latest snapshot of each object (highest resourceVersion, else the last); also how
    many were superseded, and how many kept ones took a part from an older one (:func:`_fill_from`)."""
    latest: dict[tuple, int] = {}
    kept: list[_Item | None] = []
    superseded = filled = 0
    for item in items:
        meta = item.obj.get("metadata")
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
            kept.append(item)  # rejected later, with its own reason
            continue
        uid, namespace = meta.get("uid"), meta.get("namespace") or "default"
        if not isinstance(namespace, str) or (uid is not None and not isinstance(uid, str)):
            kept.append(item)  # rejected later, with its own reason
            continue
        identity = (item.kind, uid) if uid else (item.kind, namespace, meta["name"])
        if identity not in latest:
            latest[identity] = len(kept)
            kept.append(item)
            continue
        superseded += 1
        index = latest[identity]
        previous = kept[index]
        assert previous is not None  # ``latest`` points at the kept item of each identity
        newer, older = (item, previous) if _version(item.obj) >= _version(previous.obj) else (previous, item)
        filled += _fill_from(newer, older)
        if newer is item:
            kept[index] = None
            latest[identity] = len(kept)
            kept.append(item)
    return [i for i in kept if i is not None], superseded, filled


def _fill_from(newer: _Item, older: _Item) -> bool:
    """A snapshot printed without its ``spec`` or its ``status.conditions`` (an excerpt: the Volcano
    docs show a Completed job as its state alone) takes them from an older snapshot of the same
    object: a job's spec does not change, and the conditions it had are its history."""
    obj, old = newer.obj, older.obj
    took = False
    if not isinstance(obj.get("spec"), dict) and isinstance(old.get("spec"), dict):
        newer.obj = obj = {**obj, "spec": old["spec"]}
        took = True
    status, old_status = obj.get("status"), old.get("status")
    if (
        isinstance(status, dict)
        and isinstance(old_status, dict)
        and "conditions" not in status
        and isinstance(old_status.get("conditions"), list)
    ):
        newer.obj = {**obj, "status": {**status, "conditions": old_status["conditions"]}}
        took = True
    return took


def _version(obj: dict) -> int:
    value = (obj.get("metadata") or {}).get("resourceVersion")
    return int(value) if isinstance(value, str) and value.isdigit() else -1


# --- one object ----------------------------------------------------------------------------


def _meta(obj: dict, created_fallback: datetime | None = None) -> _Meta:
    """The object's metadata, checked; ``created_fallback`` stands for a creationTimestamp that
    the input leaves out (a Volcano Job printed with its metadata elided)."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        raise _Reject("metadata missing")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise _Reject("metadata.name missing")
    namespace = meta.get("namespace") or "default"
    if not isinstance(namespace, str):
        raise _Reject(f"metadata.namespace is {_type(namespace)}")
    if meta.get("creationTimestamp") is None and created_fallback is None:
        raise _Reject("metadata.creationTimestamp missing")
    created = _ts(meta.get("creationTimestamp"), "metadata.creationTimestamp") or created_fallback
    if created is None:
        raise _Reject("metadata.creationTimestamp is the zero time")
    uid = meta.get("uid")
    owners = meta.get("ownerReferences") or []
    return _Meta(
        name=name,
        namespace=namespace,
        uid=uid if isinstance(uid, str) and uid else None,
        created=created,
        deleted=_ts(meta.get("deletionTimestamp"), "metadata.deletionTimestamp"),
        labels=_strings(meta.get("labels"), "metadata.labels"),
        annotations=_strings(meta.get("annotations"), "metadata.annotations"),
        owners=[o for o in _list(owners, "metadata.ownerReferences") if isinstance(o, dict)],
    )


def _meta_spec_status(obj: dict) -> tuple[_Meta, dict, dict]:
    """An object's metadata (checked), spec and status (empty when absent)."""
    return _meta(obj), _dict(obj.get("spec"), "spec"), _dict(obj.get("status"), "status")


def _parse_pod(item: _Item) -> _Pod:
    obj = item.obj
    try:
        meta, spec, status = _meta_spec_status(obj)
        gpu, cpu, equiv, fractional = _pod_gpus(meta, spec)
        phase = status.get("phase")
        conditions = [c for c in _list(status.get("conditions"), "status.conditions") if isinstance(c, dict)]
        statuses = _container_statuses(status, spec)
        starts, ends, oom = _container_times(statuses)
        exit_code = _exit_code(statuses, spec)

        start = min((t for t in starts if t is not None), default=None)
        if start is None and phase != "Pending":
            start = _ts(status.get("startTime"), "status.startTime")
        state = _pod_state(phase, status.get("reason"), conditions, meta.deleted, oom, exit_code)
        end = None
        if state != "RUNNING":
            end = max((t for t in ends if t is not None), default=None) or meta.deleted
            if end is None:
                times = [
                    _ts(c.get("lastTransitionTime"), "status.conditions.lastTransitionTime")
                    for c in conditions
                ]
                end = max((t for t in times if t is not None), default=None)
        node = spec.get("nodeName")
        return _Pod(
            line=item.line,
            obj=obj,
            meta=meta,
            node=node if isinstance(node, str) and node else None,
            state=state,
            start=start,
            end=end,
            exit_code=exit_code,
            oom=oom and state == "OUT_OF_MEMORY",
            oom_exit0=oom and state == "COMPLETED",
            gpu=gpu,
            cpu=cpu,
            fractional_gpu=fractional,
            gpu_equiv=equiv,
        )
    except (TypeError, ValueError, AttributeError, KeyError) as exc:  # a field of an unexpected type
        raise _Reject(f"malformed Pod: {exc}") from exc


def _pod_gpus(meta: _Meta, spec: dict) -> tuple[int, Decimal | None, Decimal, bool]:
    """(GPU devices, CPUs, GPU equivalent, fractional?) from the resources, else Run:ai annotations."""
    gpu, cpu, equiv = _pod_resources(spec)
    if gpu == 0:  # Run:ai asks for a MIG instance by annotation (runai submit --mig-profile)
        for key, value in sorted(meta.annotations.items()):
            if _MIG_PROFILE.fullmatch(key):
                count = _quantity(value, f"annotation {key}")
                if count != count.to_integral_value():
                    raise _Reject(f"bad quantity annotation {key}={value!r}: MIG instances are whole")
                gpu += int(count)
                equiv += int(count) * _gpu_equivalent(key, {}, "annotations")
    if gpu == 0 and GPU_FRACTION_ANNOTATION in meta.annotations:
        fraction = _quantity(
            meta.annotations[GPU_FRACTION_ANNOTATION], f"annotation {GPU_FRACTION_ANNOTATION}"
        )
        if fraction > 0:
            return math.ceil(fraction), cpu, fraction, True
    return gpu, cpu, equiv, False


def _container_statuses(status: dict, spec: dict) -> list[dict]:
    """Init containers first, then the app containers in the order of the spec."""
    app = [
        s for s in _list(status.get("containerStatuses"), "status.containerStatuses") if isinstance(s, dict)
    ]
    init = [
        s
        for s in _list(status.get("initContainerStatuses"), "status.initContainerStatuses")
        if isinstance(s, dict)
    ]
    return init + _in_spec_order(app, spec)


def _container_times(statuses: list[dict]) -> tuple[list[datetime | None], list[datetime | None], bool]:
    """Every container's start and finish times, and whether one was OOMKilled."""
    starts: list[datetime | None] = []
    ends: list[datetime | None] = []
    oom = False
    for s in statuses:
        where = f"containerStatuses[{s.get('name')}]"
        state = _dict(s.get("state"), f"{where}.state")
        last = _dict(s.get("lastState"), f"{where}.lastState")
        running = _dict(state.get("running"), f"{where}.state.running")
        terminated = _dict(state.get("terminated"), f"{where}.state.terminated")
        previous = _dict(last.get("terminated"), f"{where}.lastState.terminated")
        starts += [
            _ts(running.get("startedAt"), f"{where}.state.running.startedAt"),
            _ts(terminated.get("startedAt"), f"{where}.state.terminated.startedAt"),
            _ts(previous.get("startedAt"), f"{where}.lastState.terminated.startedAt"),
        ]
        ends.append(_ts(terminated.get("finishedAt"), f"{where}.state.terminated.finishedAt"))
        oom = oom or terminated.get("reason") == "OOMKilled"
    return starts, ends, oom


def _pod_state(
    phase: Any,
    reason: Any,
    conditions: list[dict],
    deleted: datetime | None,
    oom: bool,
    exit_code: int | None,
) -> str:
    if phase == "Succeeded":
        return "COMPLETED"
    disruption = None
    for c in conditions:
        if c.get("type") == "DisruptionTarget" and c.get("status") == "True":
            disruption = "NODE_FAIL" if c.get("reason") in NODE_GONE_REASONS else "PREEMPTED"
    if disruption is None and reason == "NodeLost":
        disruption = "NODE_FAIL"
    if disruption is None and reason in PREEMPTED_POD_REASONS:
        disruption = "PREEMPTED"
    if phase == "Failed":
        if disruption:
            return disruption
        if oom:
            return "OUT_OF_MEMORY"
        if reason == "DeadlineExceeded":
            return "TIMEOUT"
        if deleted is not None and exit_code in (None, 137, 143):
            return "CANCELLED"
        return "FAILED"
    if phase in ("Running", "Pending"):
        if disruption:
            return disruption
        return "CANCELLED" if deleted is not None else "RUNNING"
    if phase is None:
        raise _Reject("status.phase missing: not an object read from a cluster")
    raise _Reject(f"unrecognised pod phase {phase!r}: state cannot be determined")


def _parse_job(item: _Item) -> _Job:
    obj = item.obj
    try:
        meta, spec, status = _meta_spec_status(obj)
        template = _dict(_dict(spec.get("template"), "spec.template").get("spec"), "spec.template.spec")
        has_template = bool(template.get("containers"))
        gpu, cpu, equiv = _pod_resources(template) if has_template else (0, None, Decimal(0))
        parallelism = _count(spec.get("parallelism"), "spec.parallelism", default=1)
        completions = _count(spec.get("completions"), "spec.completions", default=parallelism)
        width = max(1, min(parallelism, completions))

        condition = None
        for c in _list(status.get("conditions"), "status.conditions"):
            if not isinstance(c, dict) or c.get("status") != "True":
                continue
            kind = c.get("type")
            if kind in ("Complete", "SuccessCriteriaMet", "Failed", "FailureTarget"):
                when = _ts(c.get("lastTransitionTime"), f"status.conditions[{kind}].lastTransitionTime")
                final = kind in ("Complete", "Failed")
                if condition is None or final:
                    condition = (kind, c.get("reason"), when)
        return _Job(
            line=item.line,
            obj=obj,
            meta=meta,
            template_gpu=gpu,
            template_cpu=cpu,
            template_equiv=equiv,
            has_template=has_template,
            width=width,
            start=_ts(status.get("startTime"), "status.startTime"),
            completion=_ts(status.get("completionTime"), "status.completionTime"),
            condition=condition,
        )
    except (TypeError, ValueError, AttributeError, KeyError) as exc:
        raise _Reject(f"malformed Job: {exc}") from exc


def _pod_owner(obj: dict) -> tuple[str, str, str, str | None] | None:
    """(family, namespace, name, uid) of the Job or workload a pod belongs to, if any."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return None
    namespace = meta.get("namespace") or "default"
    if not isinstance(namespace, str):
        return None  # the pod is rejected for it
    refs = meta.get("ownerReferences")
    owners = [o for o in refs if isinstance(o, dict)] if isinstance(refs, list) else []
    owners.sort(key=lambda o: o.get("controller") is not True)  # the controller first
    for owner in owners:
        kind, name, uid = owner.get("kind"), owner.get("name"), owner.get("uid")
        if not isinstance(kind, str) or not isinstance(name, str) or not name:
            continue
        family = _owner_family(kind, owner.get("apiVersion"))
        if family is not None:
            return (family, namespace, name, uid if isinstance(uid, str) and uid else None)
    labels = meta.get("labels")
    if not isinstance(labels, dict):
        labels = {}
    for label in WORKLOAD_NAME_LABELS:
        if isinstance(labels.get(label), str) and labels[label]:
            return ("workload", namespace, labels[label], None)
    if labels.get("group-name") == "kubeflow.org" and isinstance(labels.get("job-name"), str):
        return ("workload", namespace, labels["job-name"], None)  # tf-operator/pytorch-operator < 1.0
    for label in JOB_NAME_LABELS:
        if isinstance(labels.get(label), str) and labels[label]:
            uid = next(
                (labels[u] for u in JOB_UID_LABELS if isinstance(labels.get(u), str) and labels[u]), None
            )
            return ("Job", namespace, labels[label], uid)
    return None


def _owner_family(kind: str, api: Any) -> str | None:
    """What a pod's owner reference of ``kind`` and ``api`` makes it part of: a batch ``Job``, a
    ``workload`` (a training job, a Volcano Job), or nothing we fold pods into."""
    version = api if isinstance(api, str) else ""
    if kind == "Job" and (api is None or version.startswith("batch/")):
        return "Job"
    if kind in WORKLOAD_OWNER_KINDS or (kind == "Job" and version.startswith(VOLCANO_GROUP + "/")):
        return "workload"
    return None


def _loose_keys(obj: dict) -> list[tuple]:
    """Keys a rejected Job can still be recognised by, whatever else is wrong with it."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
    keys: list[tuple] = []
    if isinstance(meta.get("uid"), str) and meta["uid"]:
        keys.append(("uid", meta["uid"]))
    namespace = meta.get("namespace") or "default"
    if isinstance(meta.get("name"), str) and meta["name"] and isinstance(namespace, str):
        keys.append(("name", namespace, meta["name"]))
    return keys


# --- resources -----------------------------------------------------------------------------


def _pod_resources(spec: dict) -> tuple[int, Decimal | None, Decimal]:
    """GPU devices, cpu cores and GPU-equivalents (physical GPUs, see :func:`_gpu_equivalent`) a
    pod (spec) holds, as the scheduler counts requests."""
    app_gpu, app_cpu, app_equiv = 0, None, Decimal(0)
    init_gpu, init_cpu, init_equiv = 0, None, Decimal(0)
    for index, container in enumerate(_list(spec.get("containers"), "spec.containers")):
        gpu, cpu, equiv = _container_resources(container, f"containers[{index}]")
        app_gpu += gpu
        app_cpu = _add(app_cpu, cpu)
        app_equiv += equiv
    for index, container in enumerate(_list(spec.get("initContainers"), "spec.initContainers")):
        gpu, cpu, equiv = _container_resources(container, f"initContainers[{index}]")
        if isinstance(container, dict) and container.get("restartPolicy") == "Always":  # a sidecar
            app_gpu += gpu
            app_cpu = _add(app_cpu, cpu)
            app_equiv += equiv
        else:
            init_gpu = max(init_gpu, gpu)
            init_cpu = cpu if init_cpu is None else max(init_cpu, cpu or Decimal(0))
            init_equiv = max(init_equiv, equiv)
    cpu_total = app_cpu if init_cpu is None else max(app_cpu or Decimal(0), init_cpu)
    return max(app_gpu, init_gpu), cpu_total, max(app_equiv, init_equiv)


def _container_resources(container: Any, where: str) -> tuple[int, Decimal | None, Decimal]:
    container = _dict(container, where)
    resources = _dict(container.get("resources"), f"{where}.resources")
    return _resource_list(resources, where)


def _resource_list(resources: dict, where: str) -> tuple[int, Decimal | None, Decimal]:
    """(GPU devices, cpu cores, GPU-equivalents) of one ResourceRequirements."""
    requests = _dict(resources.get("requests"), f"{where}.resources.requests")
    limits = _dict(resources.get("limits"), f"{where}.resources.limits")
    merged = {**limits, **requests}  # requests, falling back to limits
    gpu, cpu, equiv = 0, None, Decimal(0)
    for name in sorted(merged):
        value = merged[name]
        if name in GPU_RESOURCES or name.startswith(GPU_RESOURCE_PREFIXES):
            amount = _quantity(value, f"{where} {name}")
            if amount != amount.to_integral_value():
                raise _Reject(f"bad quantity {name}={value!r} in {where}: GPUs are whole devices")
            gpu += int(amount)
            equiv += int(amount) * _gpu_equivalent(name, merged, where)
        elif name == "cpu":
            cpu = _quantity(value, f"{where} cpu")
    return gpu, cpu, equiv


def _gpu_equivalent(name: str, resources: dict, where: str) -> Decimal:
    """How much of a physical GPU one device of resource ``name`` is.

    - ``nvidia.com/mig-<g>g.<mem>``: g compute slices of 7 (A100, H100, H200, B200), or of 4 on
      an A30 (profiles 1g.6gb, 2g.12gb, 4g.24gb): ``mig-3g.40gb`` = 3/7.
    - HAMi ``nvidia.com/vgpu``: the share of the card's cores it is limited to,
      ``nvidia.com/gpucores`` (percent), else ``nvidia.com/gpumem-percentage``; without either,
      HAMi sets no compute limit and the vGPU may use the whole card: 1.
    - every other GPU resource is a whole GPU: 1.
    """
    match = _MIG_PROFILE.fullmatch(name)
    if match:
        slices = Decimal(4) if match.group(2) in _A30_PROFILES else Decimal(7)
        return min(Decimal(match.group(1)) / slices, Decimal(1))
    if name == "nvidia.com/vgpu":
        for limit in ("nvidia.com/gpucores", "nvidia.com/gpumem-percentage"):
            if limit in resources:
                percent = _quantity(resources[limit], f"{where} {limit}")
                if 0 < percent <= 100:
                    return percent / Decimal(100)
    return Decimal(1)


def _quantity(value: Any, where: str) -> Decimal:
    """A Kubernetes resource quantity ("500m", "2", "1Gi", "1e3") as a Decimal >= 0."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise _Reject(f"bad quantity {where}: {value!r}")
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise _Reject(f"bad quantity {where}: {value!r}")
        number = Decimal(str(value))
    else:
        match = _QUANTITY.match(value.strip())
        if match is None:
            raise _Reject(f"bad quantity {where}: {value!r}")
        mantissa, suffix = match.group(1), match.group(2) or ""
        try:
            number = Decimal(mantissa)
            if suffix[:1] in ("e", "E") and len(suffix) > 1:
                number = number.scaleb(int(suffix[1:]))
            else:
                number *= _SUFFIXES[suffix]
        except (ArithmeticError, ValueError) as exc:  # decimal.InvalidOperation, Overflow
            raise _Reject(f"bad quantity {where}: {value!r}") from exc
    if number < 0:
        raise _Reject(f"bad quantity {where}: {value!r} is negative")
    if number > MAX_QUANTITY:
        raise _Reject(f"bad quantity {where}: {value!r} is implausibly large")
    return number


def _add(total: Decimal | None, value: Decimal | None) -> Decimal | None:
    if value is None:
        return total
    return value if total is None else total + value


def _peak_resources(pods: list[_Pod]) -> tuple[int, Decimal | None, Decimal]:
    """(GPU devices, cpu cores, GPU-equivalents) the pods held at most at the same time."""
    gpu, cpu, equiv = (_peak(pods, attr) for attr in ("gpu", "cpu", "gpu_equiv"))
    return int(gpu or 0), None if cpu is None else Decimal(cpu), Decimal(equiv or 0)


def _peak(pods: list[_Pod], attr: str) -> int | Decimal | None:
    """Most of a resource the pods held at the same time (running pods hold it until now)."""
    events = []
    for pod in pods:
        value = getattr(pod, attr)
        if value is None:
            continue
        begin = pod.start or pod.meta.created
        events.append((begin, 1, value))
        if pod.end is not None:
            events.append((max(pod.end, begin), 0, value))  # at one instant, ends come first
    if not events:
        return None
    held = peak = 0
    for _, opening, value in sorted(events, key=lambda e: (e[0], e[1])):
        held = held + value if opening else held - value
        peak = max(peak, held)
    return peak


# --- one job -------------------------------------------------------------------------------


def _row(group: _Group, cluster: str, source_file: str, classifier) -> dict[str, Any]:
    # in the order they ended; at one instant a failure sorts after a success
    pods = sorted(
        group.pods,
        key=lambda p: (p.end or p.start or p.meta.created, -1 if p.state == "COMPLETED" else 0, p.line),
    )
    job = group.job
    decisive = pods[-1] if pods else None

    if job is not None:
        state, end = _job_state(job, pods)
        decisive = _decisive(pods, completed=state == "COMPLETED")
        if state == "FAILED" and decisive is not None and decisive.state == "OUT_OF_MEMORY":
            state = "OUT_OF_MEMORY"
        submit = job.meta.created
        start = job.start or min((p.start for p in pods if p.start), default=None)
        if job.has_template:
            gpu = job.template_gpu * job.width
            cpu = None if job.template_cpu is None else job.template_cpu * job.width
            equiv = job.template_equiv * job.width
        else:
            gpu, cpu, equiv = _peak_resources(pods)
        line = job.line
    else:
        if any(p.state == "RUNNING" for p in pods):
            state, end = "RUNNING", None
        else:
            assert decisive is not None  # a group without a Job is its pods
            state = decisive.state
            end = max((p.end for p in pods if p.end), default=None)
        submit = min(p.meta.created for p in pods)
        start = min((p.start for p in pods if p.start), default=None)
        gpu, cpu, equiv = _peak_resources(pods)
        line = min(p.line for p in pods)

    nodes = sorted({p.node for p in pods if p.node})
    objects = ([job.meta] if job else []) + [p.meta for p in pods]
    labels: dict[str, str] = {}
    for meta in reversed(objects):  # the job-level object's labels win
        labels.update(meta.labels)
    user = next(
        (
            source[key]
            for meta in objects
            for source in (meta.labels, meta.annotations)
            for key in USER_KEYS
            if source.get(key)
        ),
        group.namespace,
    )
    gpu = int(gpu)
    return {
        "cluster": cluster,
        "job_id": group.uid or f"{group.namespace}/{group.name}",
        "job_name": group.name,
        "user": user,
        "job_type": classifier.classify(group.name, group.namespace, labels, gpu),
        "state": state,
        "submit_time": submit,
        "start_time": start,
        "end_time": end if state != "RUNNING" else None,
        "gpu_num": gpu,
        "gpu_share": _share(gpu, equiv),
        "cpu_num": None if cpu is None else math.ceil(cpu),
        "node_num": len(nodes) if nodes else None,
        "node_list": ",".join(nodes) if nodes else None,
        "exit_code": decisive.exit_code if decisive is not None else None,
        "source": SOURCE,
        "source_file": source_file,
        "source_line": line,
    }


def _parse_object(item: _Item, present_uids: set) -> _Object:
    """A Kubeflow training job (v1 ``*ReplicaSpecs``), TrainJob, JobSet or Kueue Workload.

    Size: the sum over its pod templates of (replicas x pods per replica x the template's
    resources): ``spec.<role>ReplicaSpecs.<role>.replicas``; TrainJob ``spec.trainer.numNodes`` x
    ``resourcesPerNode``; JobSet ``replicatedJobs[].replicas`` x the Job's ``parallelism``;
    Workload ``podSets[].count``. State from the conditions: Succeeded/Complete/Completed, or a
    Kueue ``Finished`` with reason Succeeded -> COMPLETED; Failed (or ``Finished`` with another
    reason) -> FAILED, TIMEOUT when the reason says DeadlineExceeded; being deleted -> CANCELLED;
    Kueue ``Evicted`` by preemption while not finished -> PREEMPTED; running -> RUNNING; not started
    yet (no Running/Admitted condition, no start time) -> skipped with a count, as sacct's PENDING.
    A Kueue Workload takes its job's uid (``kueue.x-k8s.io/job-uid``) as ``job_id``, so it merges
    with the job's own record; it is skipped when that job is in the input.
    """
    obj = item.obj
    kind = str(obj.get("kind"))  # one of WORKLOAD_OBJECT_KINDS: the caller selected the object by it
    try:
        meta, spec, status = _meta_spec_status(obj)
        job_id = meta.uid
        if kind == "Workload":
            owner_uid = meta.labels.get("kueue.x-k8s.io/job-uid") or next(
                (o.get("uid") for o in meta.owners if isinstance(o, dict) and o.get("controller")), None
            )
            if owner_uid and owner_uid in present_uids:
                raise _Skip(SKIP_OWNED_WORKLOAD)
            job_id = owner_uid or meta.uid
        gpu, cpu, equiv = _object_resources(kind, spec)
        conditions = {
            c.get("type"): c
            for c in _list(status.get("conditions"), "status.conditions")
            if isinstance(c, dict) and str(c.get("status")) == "True"
        }

        def when(ctype: str) -> datetime | None:
            c = conditions.get(ctype)
            return (
                _ts(c.get("lastTransitionTime"), f"status.conditions[{ctype}].lastTransitionTime")
                if c
                else None
            )

        start = _ts(status.get("startTime"), "status.startTime") or when("Running") or when("Admitted")
        done = _ts(status.get("completionTime"), "status.completionTime")
        state, end = None, None
        for ctype in ("Succeeded", "Complete", "Completed", "Finished", "Failed"):
            c = conditions.get(ctype)
            if c is None:
                continue
            reason = str(c.get("reason") or "")
            failed = ctype == "Failed" or (ctype == "Finished" and reason not in ("Succeeded", "JobFinished"))
            if ctype == "Finished" and reason == "JobFinished":  # Kueue < 0.8 says it in the message
                failed = "fail" in str(c.get("message") or "").lower()
            state = ("TIMEOUT" if "DeadlineExceeded" in reason else "FAILED") if failed else "COMPLETED"
            end = done or when(ctype)
            break
        if state is None:
            if meta.deleted is not None:
                state, end = "CANCELLED", meta.deleted
            elif "Evicted" in conditions and "Preempted" in str(conditions["Evicted"].get("reason")):
                state, end = "PREEMPTED", when("Evicted")
            elif start is not None or "Running" in conditions:
                state = "RUNNING"
            else:
                raise _Skip(SKIP_NOT_ADMITTED)
        return _Object(item.line, str(kind), meta, job_id, state, start, end, gpu, cpu, equiv)
    except (TypeError, ValueError, AttributeError, KeyError) as exc:
        raise _Reject(f"malformed {kind}: {exc}") from exc


def _parse_volcano(item: _Item) -> _Object:
    """A Volcano Job (``batch.volcano.sh``): size from its tasks (:func:`_object_resources`), state
    from ``status.state.phase`` (:data:`VOLCANO_ENDED`; Pending/Running/Restarting/Completing/
    Terminating/Aborting -> RUNNING; Pending that never ran, or no status -> skipped as not started).

    Times: submit = ``creationTimestamp``, else the first ``status.conditions`` transition (Volcano
    records each phase there: the first is the job's Pending on creation), else unknown (null);
    ``status.runningDuration`` before an ended state's transition (it counts from creation), else
    unknown (null); start = the first Running transition, else the state's own transition while
    Running, else unknown; end = the state's transition once ended. Without ``spec.tasks`` (an
    excerpt) the size is unknown (null GPUs and CPUs)."""
    obj = item.obj
    try:
        phase, since, first, start = _volcano_times(_dict(obj.get("status"), "status"))
        if phase is None:  # no status: a manifest, or a job the controller has not seen yet
            raise _Skip(SKIP_NOT_ADMITTED)
        meta = _meta(obj, first or start or since)
        spec = _dict(obj.get("spec"), "spec")
        gpu: int | None
        gpu, cpu, equiv = _object_resources("Job", spec) if "tasks" in spec else (None, None, Decimal(0))
    except (TypeError, ValueError, AttributeError, KeyError) as exc:
        raise _Reject(f"malformed Volcano Job: {exc}") from exc
    if phase in VOLCANO_ENDED:
        result, end = VOLCANO_ENDED[str(phase)], since
    elif meta.deleted is not None:
        result, end = "CANCELLED", meta.deleted
    elif phase in VOLCANO_NOT_ENDED and (start is not None or phase != "Pending"):
        result, end = "RUNNING", None
    elif phase == "Pending":
        raise _Skip(SKIP_NOT_ADMITTED)
    else:
        raise _Reject(f"unknown Volcano Job phase {phase!r} (status.state.phase)")
    has_submit = isinstance(obj["metadata"].get("creationTimestamp"), str) or first is not None
    return _Object(
        item.line, "Job", meta, meta.uid, result, start, end, gpu, cpu, equiv,
        submit=meta.created, has_submit=has_submit,
    )  # fmt: skip


def _volcano_times(status: dict) -> tuple[Any, datetime | None, datetime | None, datetime | None]:
    """(phase, the state's transition, the first recorded transition, the start) of a Volcano Job."""
    state = _dict(status.get("state"), "status.state")
    phase = state.get("phase")
    since = _ts(state.get("lastTransitionTime"), "status.state.lastTransitionTime")
    history = [
        (str(c.get("status")), _ts(c.get("lastTransitionTime"), "status.conditions[].lastTransitionTime"))
        for c in _list(status.get("conditions"), "status.conditions")
        if isinstance(c, dict)
    ]
    first = min((t for _, t in history if t is not None), default=None)
    start = min((t for phase_, t in history if phase_ == "Running" and t is not None), default=None)
    if start is None and phase == "Running":
        start = since
    # runningDuration counts from the job's creation (Volcano's controller: time since
    # creationTimestamp), so it gives the creation time of an ended job printed without its history
    ran = _go_duration(status.get("runningDuration"))
    if first is None and phase in VOLCANO_ENDED and since is not None and ran is not None:
        first = since - timedelta(seconds=ran)
    return phase, since, first, start


def _go_duration(value: Any) -> float | None:
    """Seconds of a Go duration string (``1m49s``, ``2h3m4.5s``, ``750ms``); None when absent or not one."""
    if not isinstance(value, str) or not value:
        return None
    parts = _GO_DURATION.findall(value)
    if not parts or "".join(n + u for n, u in parts) != value:
        return None
    return sum(float(n) * _GO_UNITS[u] for n, u in parts)


def _object_resources(kind: str, spec: dict) -> tuple[int, Decimal | None, Decimal]:
    """(GPU devices, cpu cores, GPU-equivalents) a workload object asks for in all."""
    if kind == "TrainJob":
        trainer = _dict(spec.get("trainer"), "spec.trainer")
        nodes = _count(trainer.get("numNodes"), "spec.trainer.numNodes", default=1)
        gpu, cpu, equiv = _resource_list(
            _dict(trainer.get("resourcesPerNode"), "resourcesPerNode"), "spec.trainer"
        )
        return gpu * nodes, None if cpu is None else cpu * nodes, equiv * nodes
    parts = _POD_TEMPLATES.get(kind, _kubeflow_templates)(spec)
    gpu, cpu, equiv = 0, None, Decimal(0)
    for pods, pod_spec in parts:
        g, c, e = _pod_resources(pod_spec)
        gpu += pods * g
        cpu = _add(cpu, None if c is None else c * pods)
        equiv += pods * e
    return gpu, cpu, equiv


def _workload_templates(spec: dict) -> list[tuple[int, dict]]:
    """Kueue Workload: (``podSets[].count``, the pod set's template spec)."""
    parts = []
    for index, pod_set in enumerate(_list(spec.get("podSets"), "spec.podSets")):
        pod_set = _dict(pod_set, f"spec.podSets[{index}]")
        template = _dict(pod_set.get("template"), f"spec.podSets[{index}].template")
        parts.append(
            (
                _count(pod_set.get("count"), "podSets.count", default=1),
                _dict(template.get("spec"), "template.spec"),
            )
        )
    return parts


def _jobset_templates(spec: dict) -> list[tuple[int, dict]]:
    """JobSet: (``replicatedJobs[].replicas`` x the Job's ``parallelism``, the Job's pod template spec)."""
    parts = []
    for index, replicated in enumerate(_list(spec.get("replicatedJobs"), "spec.replicatedJobs")):
        replicated = _dict(replicated, f"spec.replicatedJobs[{index}]")
        job_spec = _dict(_dict(replicated.get("template"), "template").get("spec"), "template.spec")
        pod_spec = _dict(_dict(job_spec.get("template"), "template.spec.template").get("spec"), "pod spec")
        replicas = _count(replicated.get("replicas"), "replicatedJobs.replicas", default=1)
        parallelism = _count(job_spec.get("parallelism"), "parallelism", default=1)
        parts.append((replicas * parallelism, pod_spec))
    return parts


def _volcano_templates(spec: dict) -> list[tuple[int, dict]]:
    """Volcano Job: (``tasks[].replicas``, the task's pod template spec)."""
    parts = []
    for index, task in enumerate(_list(spec.get("tasks"), "spec.tasks")):
        task = _dict(task, f"spec.tasks[{index}]")
        template = _dict(task.get("template"), f"spec.tasks[{index}].template")
        parts.append(
            (
                _count(task.get("replicas"), f"spec.tasks[{index}].replicas", default=1),
                _dict(template.get("spec"), f"spec.tasks[{index}].template.spec"),
            )
        )
    return parts


def _kubeflow_templates(spec: dict) -> list[tuple[int, dict]]:
    """Kubeflow v1: ``spec.<kind>ReplicaSpecs.<role>``: (replicas, the role's pod template spec)."""
    parts = []
    for key, roles in spec.items():
        if not key.endswith("ReplicaSpecs"):
            continue
        for role, replica in _dict(roles, f"spec.{key}").items():
            replica = _dict(replica, f"spec.{key}.{role}")
            template = _dict(replica.get("template"), f"spec.{key}.{role}.template")
            parts.append(
                (
                    _count(replica.get("replicas"), f"{role}.replicas", default=1),
                    _dict(template.get("spec"), "template.spec"),
                )
            )
    return parts


_POD_TEMPLATES = {"Workload": _workload_templates, "JobSet": _jobset_templates, "Job": _volcano_templates}


def _object_row(obj: _Object, cluster: str, source_file: str, classifier) -> dict[str, Any]:
    meta = obj.meta
    user = next(
        (src[key] for src in (meta.labels, meta.annotations) for key in USER_KEYS if src.get(key)),
        meta.namespace,
    )
    return {
        "cluster": cluster,
        "job_id": obj.job_id or f"{meta.namespace}/{meta.name}",
        "job_name": meta.name,
        "user": user,
        "job_type": classifier.classify(meta.name, meta.namespace, meta.labels, obj.gpu or 0),
        "state": obj.state,
        "submit_time": (obj.submit or meta.created) if obj.has_submit else None,
        "start_time": obj.start,
        "end_time": obj.end if obj.state != "RUNNING" else None,
        "gpu_num": obj.gpu,
        "gpu_share": None if obj.gpu is None else _share(obj.gpu, obj.equiv),
        "cpu_num": None if obj.cpu is None else math.ceil(obj.cpu),
        "node_num": None,
        "node_list": None,
        "exit_code": None,
        "source": SOURCE,
        "source_file": source_file,
        "source_line": obj.line,
    }


def _decisive(pods: list[_Pod], *, completed: bool) -> _Pod | None:
    """The pod whose outcome is the Job's: the last to succeed for a completed Job, the last
    to fail for any other; else the last to end."""
    if completed:
        chosen = [p for p in pods if p.state == "COMPLETED"]
    else:
        chosen = [p for p in pods if p.state not in ("COMPLETED", "RUNNING")]
    return (chosen or pods)[-1] if pods else None


def _job_state(job: _Job, pods: list[_Pod]) -> tuple[str, datetime | None]:
    last_end = max((p.end for p in pods if p.end), default=None)
    if job.condition is not None:
        kind, reason, when = job.condition
        if kind in ("Complete", "SuccessCriteriaMet"):
            return "COMPLETED", job.completion or when or last_end
        state = "TIMEOUT" if reason == "DeadlineExceeded" else "FAILED"
        return state, when or job.completion or last_end
    if job.meta.deleted is not None:
        return "CANCELLED", last_end or job.meta.deleted
    return "RUNNING", None


# --- small helpers -------------------------------------------------------------------------


def _share(gpu: int, equiv: Decimal) -> float | None:
    """``gpu_share``: the physical GPUs held when that is not the device count, else null."""
    return None if equiv == gpu else round(float(equiv), 6)


def _key(uid: str | None, namespace: str, family: str, name: str) -> tuple:
    return ("uid", uid) if uid else ("name", namespace, family, name)


def _in_spec_order(statuses: list[dict], spec: dict) -> list[dict]:
    order = {
        c.get("name"): i
        for i, c in enumerate(_list(spec.get("containers"), "spec.containers"))
        if isinstance(c, dict) and isinstance(c.get("name"), str)
    }
    return sorted(statuses, key=lambda s: order.get(_name(s), len(order)))


def _name(obj: dict) -> str | None:
    name = obj.get("name")
    return name if isinstance(name, str) else None


def _exit_code(statuses: list[dict], spec: dict) -> int | None:
    codes = []
    for s in statuses:
        terminated = (s.get("state") or {}).get("terminated") or {}
        code = terminated.get("exitCode")
        if code is None:
            continue
        if isinstance(code, bool) or not isinstance(code, int) or not -INT32_MAX - 1 <= code <= INT32_MAX:
            raise _Reject(f"bad exitCode {code!r} in containerStatuses[{s.get('name')}]")
        codes.append((s.get("name"), code))
    failing = next((code for _, code in codes if code != 0), None)
    if failing is not None:
        return failing
    containers = [c for c in _list(spec.get("containers"), "spec.containers") if isinstance(c, dict)]
    main = containers[0].get("name") if containers else None
    return next((code for name, code in codes if name == main), codes[-1][1] if codes else None)


def _ts(value: Any, where: str) -> datetime | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise _Reject(f"bad timestamp in {where}: {value!r}")
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError as exc:
        raise _Reject(f"bad timestamp in {where}: {value!r}") from exc
    if parsed.tzinfo is None:
        raise _Reject(f"bad timestamp in {where}: {value!r} has no time zone (RFC 3339 needs one)")
    if parsed.year <= 1:
        return None  # Go's zero time, written by kubelets for unknown times
    return parsed.astimezone(UTC)


def _count(value: Any, where: str, *, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= INT32_MAX:
        raise _Reject(f"bad {where}: {value!r}")
    return value


def _dict(value: Any, where: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _Reject(f"{where} is {_type(value)}, not an object")
    return value


def _list(value: Any, where: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _Reject(f"{where} is {_type(value)}, not a list")
    return value


def _strings(value: Any, where: str) -> dict[str, str]:
    return {str(k): v for k, v in _dict(value, where).items() if isinstance(v, str)}


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _type(value: Any) -> str:
    """The JSON type of a value, with its article: "an object", "a list", ..."""
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number" if isinstance(value, int | float) else type(value).__name__
    )


def _text(record: Any) -> str:
    if isinstance(record, str):
        text = record
    else:
        try:
            text = record_text(record) if isinstance(record, dict) else json.dumps(record, default=str)
        except (RecursionError, ValueError):
            text = repr(record)[:MAX_RECORD_CHARS]
    if len(text) > MAX_RECORD_CHARS:
        text = text[:MAX_RECORD_CHARS] + f"...[truncated {len(text) - MAX_RECORD_CHARS} characters]"
    return text


def parse_input(job_input, local_path) -> tuple[ParseResult, str]:
    """The format registry's entry point (:mod:`acme.jobs.formats`)."""
    from pathlib import Path

    from acme.text_input import check_input_size

    check_input_size(local_path, job_input.uri)  # a JSON document is parsed whole: refuse a huge one unread
    data = Path(local_path).read_bytes()
    return parse_kubernetes(data, job_input.cluster, source_file=job_input.uri, day=job_input.day), "k8s"
