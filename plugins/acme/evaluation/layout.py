"""Where one evaluation keeps its data in the lake.

An evaluation is identified by the checkpoint and the suite, never by the Airflow run: a re-run
(manual or retried) of the same checkpoint × suite finds its plan, outputs and metrics and only
does what is missing::

    eval/runs/<model-id>/<run>/plan.json                the plan (reused by a re-run)
    eval/runs/<model-id>/<run>/outputs/<trial>.jsonl    one line per sample: the model's answer
    eval/runs/<model-id>/<run>/timings/<trial>.json     measured set-up, load, inference seconds
    eval/runs/<model-id>/<run>/metrics/<trial>.json     per-slice scores and metric seconds
    eval/runs/<model-id>/<run>/results.parquet          dataset, metric, score, samples, times
    eval/runs/<model-id>/<run>/report.md                the short report
    eval/priors/priors.json                             learned runtime priors (+ runs folded in)
    eval/priors/measurements/<model-id>/<run>.json      every trial slice's measured times

``<run>`` is ``<suite file stem>-<8 hex of SHA-256(suite bytes, model size)>``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from acme import lake_keys
from acme.errors import InputError

PRIORS_KEY = lake_keys.EVAL_PRIORS


def run_key_for(suite_path: str | Path, model_size: str) -> str:
    path = Path(suite_path)
    digest = hashlib.sha256(path.read_bytes() + b"\0" + model_size.encode()).hexdigest()[:8]
    return f"{path.stem}-{digest}"


@dataclass(frozen=True)
class EvalRun:
    """Keys of one evaluation (checkpoint × suite) in the lake."""

    model_id: str
    run: str

    @property
    def prefix(self) -> str:
        return lake_keys.eval_run(self.model_id, self.run)

    @property
    def plan_key(self) -> str:
        return f"{self.prefix}/plan.json"

    def outputs_key(self, trial_id: str) -> str:
        return f"{self.prefix}/outputs/{trial_id}.jsonl"

    def timings_key(self, trial_id: str) -> str:
        return f"{self.prefix}/timings/{trial_id}.json"

    def metrics_key(self, trial_id: str) -> str:
        return f"{self.prefix}/metrics/{trial_id}.json"

    @property
    def results_key(self) -> str:
        return f"{self.prefix}/results.parquet"

    @property
    def report_key(self) -> str:
        return f"{self.prefix}/report.md"

    @property
    def measurements_key(self) -> str:
        return lake_keys.eval_measurements(self.model_id, self.run)

    def to_dict(self) -> dict[str, str]:
        return {"model_id": self.model_id, "run": self.run}


def json_object(text: str, source: str, what: str) -> dict[str, Any]:
    """The JSON object of a stored document (a plan, the priors); InputError naming ``source`` otherwise."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(source, f"not JSON ({exc.msg})", line=exc.lineno) from None
    if not isinstance(data, dict):
        raise InputError(source, f"{what} JSON is not an object")
    return data
