"""Decoupled evaluation scheduling (Hu et al., NSDI'24, §6.2): suite, runtime priors, the trial
coordinator's plan, and a simulator that compares it with naive and OpenCompass-style baselines.

Plain Python (no Airflow, no numpy/pandas): the DAG maps over ``Plan.trials``; the command line
calls ``plan_eval_cli``.
"""

from acme.evaluation.planner import Plan, PlannerConfig, Trial, build_plan
from acme.evaluation.priors import Hardware, Measurement, ModelSpec, RuntimePriors, parse_model_size
from acme.evaluation.simulator import compare, plan_eval_cli
from acme.evaluation.suite import EvalDataset, Suite, load_default_suite, read_suite

__all__ = [
    "EvalDataset",
    "Hardware",
    "Measurement",
    "ModelSpec",
    "Plan",
    "PlannerConfig",
    "RuntimePriors",
    "Suite",
    "Trial",
    "build_plan",
    "compare",
    "load_default_suite",
    "parse_model_size",
    "plan_eval_cli",
    "read_suite",
]
