"""Node dispatch (what the evaluate_checkpoint DAG does): trials stay on their node, any free GPU of it."""

from __future__ import annotations

import pytest

from acme.errors import ConfigError
from acme.evaluation.planner import PlannerConfig
from acme.evaluation.priors import Hardware, TrialOverheads, parse_model_size
from acme.evaluation.simulator import ClusterSpec, Job, SliceWork, simulate

OVERHEADS = TrialOverheads(setup_s=10.0, preprocess_s_per_sample=0.0, metric_task_setup_s=0.0)


def cluster(nodes: int, gpus: int) -> ClusterSpec:
    return ClusterSpec(nodes, parse_model_size("7B"), Hardware(gpus_per_node=gpus), OVERHEADS)


def job(name: str, infer: float, node: int, slot: int = 0) -> Job:
    return Job(name, (SliceWork(name, 10, 0.0, infer, 0.0),), "shm", "none", node=node, slot=slot)


def test_node_dispatch_keeps_trials_on_their_node_and_fills_its_free_gpus():
    jobs = [
        job("long", 300.0, node=0, slot=0),
        job("short", 50.0, node=0, slot=1),
        job("late", 50.0, node=0, slot=0),  # planned behind "long": node dispatch gives it GPU 1
        job("other", 10.0, node=1, slot=0),
    ]
    by_mode = {mode: simulate(cluster(2, 2), jobs, dispatch=mode) for mode in ("node", "static", "dynamic")}
    node = {r.job_id: (r.node, r.slot) for r in by_mode["node"].records}
    assert node["late"] == (0, 1)
    assert all(node[name][0] == 0 for name in ("long", "short", "late"))  # never moved to node 1
    assert {r.job_id: r.slot for r in by_mode["static"].records}["late"] == 0
    assert by_mode["node"].makespan_s < by_mode["static"].makespan_s


def test_node_dispatch_is_the_planner_default_and_needs_a_node_per_job():
    assert PlannerConfig().dispatch == "node"
    with pytest.raises(ConfigError, match="node dispatch"):
        simulate(cluster(1, 1), [Job("x", (SliceWork("x", 1, 0, 1, 0),), "shm", "none")], dispatch="node")
    with pytest.raises(ConfigError, match="dispatch must be"):
        simulate(cluster(1, 1), [job("x", 1.0, 0)], dispatch="anywhere")
