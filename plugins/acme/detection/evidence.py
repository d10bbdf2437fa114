"""A suspect's evidence log, its episode, and the ``diagnose_failures`` run it starts.

The evidence goes where the diagnosis reads logs: ``detect/cluster=<c>/job=<id>/<kind>-<episode>.log``
under the log root (``ACME_DIAGNOSIS_LOG_ROOT``, default ``{lake}/logs``), one line per finding, each
``<detected at> ERROR acme-detect: <kind>: ...``, which the rules of ``include/diagnosis/rules.yaml``
(``detected-hang``, ``detected-fail-slow``) classify. The conf of ``diagnose_failures`` names the job,
that log and the job's submit day, so the diagnosis finds the job's record (type, node list) in the lake
and routes it to ``recover_training`` like a crashed job.

An **episode** is one continuous problem of one kind on one job: detections less than ``gap`` apart
belong to the same episode (``detection/episodes/cluster=<c>/job=<id>/<kind>.json``), which names the log
and the trigger's run id, so a hang seen by ten successive runs starts one diagnosis, and a re-run of
the same detection writes the same files.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from acme.lake import Lake


def _compact(iso: str) -> str:
    return re.sub(r"[^0-9TZ]", "", iso)


def episode_of(lake: Lake, suspect: dict[str, Any], detected_at: datetime, gap: timedelta) -> dict[str, Any]:
    """The suspect's episode (the earlier one when detections continue it, else a new one), recorded."""
    from acme.lake_keys import detection_episode, safe_name

    cluster, job_id, kind = suspect["cluster"], str(suspect["job_id"]), suspect["kind"]
    key = detection_episode(cluster, job_id, kind)
    now = detected_at.isoformat()
    with lake.lock(f"detect-{cluster}-{safe_name(job_id)}-{kind}", timeout_s=60):
        earlier = lake.read_json(key, default=None)
        if earlier:
            last = datetime.fromisoformat(earlier["last_detected"])
            first = datetime.fromisoformat(earlier["first_detected"])
            if first - gap <= detected_at <= last + gap:
                earlier["last_detected"] = max(last, detected_at).isoformat()
                earlier["first_detected"] = min(first, detected_at).isoformat()
                lake.write_json(key, earlier)
                return earlier
        episode = {"episode": _compact(suspect["since"]), "first_detected": now, "last_detected": now}
        lake.write_json(key, episode)
        return episode


def evidence_location(suspect: dict[str, Any], episode: str) -> str:
    """The evidence log's location relative to the log root."""
    from acme.lake_keys import detection_evidence_log

    return detection_evidence_log(suspect["cluster"], str(suspect["job_id"]), suspect["kind"], episode)


def write_evidence(lake: Lake, suspect: dict[str, Any], location: str, detected_at: datetime) -> str:
    """Write the evidence lines (whole, replacing an earlier version) under the log root; its URL."""
    from acme import settings

    stamp = detected_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    text = "".join(f"{stamp} ERROR {line}\n" for line in suspect["evidence"]).encode()
    root = settings.diagnosis().log_root.format(lake=lake.uri).rstrip("/")
    if root == lake.uri.rstrip("/"):
        return lake.write_bytes(location, text)
    if lake.owns(root):
        return lake.write_bytes(f"{lake.key_of(root)}/{location}", text)
    import fsspec  # a log root outside the lake

    url = f"{root}/{location}"
    fs, path = fsspec.core.url_to_fs(url)
    fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    temporary = f"{path}.tmp"
    fs.pipe_file(temporary, text)
    fs.mv(temporary, path)
    return url


def diagnosis_trigger(
    lake: Lake, suspect: dict[str, Any], detected_at: datetime, gap: timedelta
) -> dict[str, Any]:
    """Write the evidence; return ``{"conf", "trigger_run_id"}`` for a ``diagnose_failures`` run."""
    from acme.lake_keys import safe_name

    episode = episode_of(lake, suspect, detected_at, gap)["episode"]
    location = evidence_location(suspect, episode)
    write_evidence(lake, suspect, location, detected_at)
    day = str(suspect.get("submit_time") or detected_at.isoformat())[:10]
    run_id = (
        f"detect__{suspect['cluster']}__{safe_name(str(suspect['job_id']))}__{suspect['kind']}__{episode}"
    )
    return {
        "conf": {
            "cluster": suspect["cluster"],
            "job_id": str(suspect["job_id"]),
            "log": location,
            "day": day,
        },
        "trigger_run_id": run_id[:250],
    }
