"""Decoupled evaluation scheduling (Hu et al., NSDI'24, §6.2): suite, runtime priors, the trial
coordinator's plan, a simulator that compares it with naive and OpenCompass-style baselines, and
the real trial steps the ``evaluate_checkpoint`` DAG runs (precursor, inference, metrics, results).

Plain Python (no Airflow, no numpy/pandas at import): the DAG maps over the plan's trials; the
command line calls ``plan_eval_cli``. The names below are loaded on first use, so a DAG file that
only needs ``acme.settings.evaluation()`` does not import the planner and simulator while parsing.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Plan": "planner",
    "PlannerConfig": "planner",
    "Trial": "planner",
    "build_plan": "planner",
    "Hardware": "priors",
    "Measurement": "priors",
    "ModelSpec": "priors",
    "RuntimePriors": "priors",
    "parse_model_size": "priors",
    "compare": "simulator",
    "plan_eval_cli": "simulator",
    "EvalDataset": "suite",
    "Suite": "suite",
    "load_default_suite": "suite",
    "read_suite": "suite",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'acme.evaluation' has no attribute {name!r}")
    return getattr(importlib.import_module(f"acme.evaluation.{module}"), name)
