"""
### Validate cordoned nodes before they rejoin

Every hour, and by hand: the nodes a recovery cordoned (`cordon` records of the action logs in the lake)
that the backend still reports out of scheduling — or the `nodes` a manual run names — are each
**validated through the recovery backend** (`ACME_RECOVERY_BACKEND`), one mapped task per node:

- the **all-gather self-test** (`acme/recovery/allgather_check.py`) on one rank per GPU
  (`ACME_VALIDATION_RANKS_PER_NODE`);
- a **DCGM diagnostic**, `dcgmi diag -r ACME_VALIDATION_DCGM_LEVEL` (default 2; 0 = none);
- a **GPU-memory check** (every GPU answers, at least `ACME_VALIDATION_MIN_FREE_MEMORY_SHARE` free) and an
  **NCCL bandwidth check** (the slowest rank's all-gather bus bandwidth at least
  `ACME_VALIDATION_MIN_BUSBW_GBPS`).

The node is **uncordoned only when every check passes** (Slurm `scontrol update NodeName=… State=RESUME`,
Kubernetes `unschedulable: false` and the recovery's taint removed); a node that fails stays cordoned and
is validated again next hour. The evidence — each check with its figures, pass/fail/skipped and times —
is the `validate` record of `recovery/cluster=<c>/node=<node>/<run>/actions.jsonl`, then its `uncordon`
record; re-running the same run never measures or uncordons twice. On Slurm a drained node takes no job,
so its checks run on it through `ACME_VALIDATION_NODE_COMMAND` (default `ssh -o BatchMode=yes {node}`);
on Kubernetes as a pod pinned to the node; the simulated backend (default, offline) passes every node
but those `ACME_VALIDATION_SIMULATED_FAULTS` names (`node:check,…`).

**Lemon nodes** (docs/lemon-nodes.md): a node that passes while the cluster's latest lemon-node list
(`recovery/lemon/cluster=<c>/date=<d>/suggestion.json`) names it stays cordoned: its `uncordon` record is
`held` with the reason (`held: lemon node, score X, rank k in <list>`), the summary lists it under
`held_lemon`, and on-call gets a notice (live runs, once per node and list). `ACME_VALIDATION_LEMON_NODES`
(`hold`, default, or `uncordon`).

**Params**: `cluster` (one, or `all`), `nodes` (empty = the cordoned nodes of the action logs; needs one
cluster), `dry_run` (default `ACME_RECOVERY_DRY_RUN`: measure and record, only plan the uncordon),
`allow_lemon` (default off; needs `nodes`: uncordon those nodes when they pass even if the lemon list
flags them).
"""

from __future__ import annotations

from airflow.sdk import Param, dag, get_current_context, task
from airflow.timetables.trigger import CronTriggerTimetable

from acme import settings
from acme.settings import recovery as recovery_settings
from acme_airflow.defaults import DEFAULT_ARGS, Tag
from acme_airflow.params import cluster_param


@dag(
    dag_id="validate_nodes",
    schedule=CronTriggerTimetable("40 * * * *", timezone="UTC"),
    start_date=settings.project().start_date,
    catchup=False,
    max_active_runs=1,
    default_args=DEFAULT_ARGS,
    tags=[Tag.RECOVERY, Tag.TRAINING],
    description="Hourly: cordoned nodes self-tested (all-gather, DCGM, GPU memory, NCCL bandwidth); passed ones uncordoned",
    doc_md=__doc__,
    params={
        "cluster": cluster_param(),
        "nodes": Param(
            [],
            type="array",
            items={"type": "string"},
            title="Nodes",
            description="Nodes to validate (one cluster); empty = the nodes the recoveries cordoned.",
        ),
        "dry_run": Param(
            recovery_settings().dry_run,
            type="boolean",
            title="Dry run",
            description="Measure and record the verdict, but only plan the uncordon.",
        ),
        "allow_lemon": Param(
            False,
            type="boolean",
            title="Uncordon lemon nodes",
            description="Uncordon the named nodes when they pass even if the latest lemon-node list flags "
            "them (needs nodes). Off: a flagged node's uncordon is held.",
        ),
    },  # fmt: skip
)
def validate_nodes():
    @task
    def find_cordoned() -> list[dict]:
        """The nodes to validate: named, or cordoned by a recovery, and still cordoned on the backend."""
        from acme_airflow.validation import find_in_task

        return find_in_task(get_current_context())

    @task(map_index_template="{{ target['cluster'] }}/{{ target['node'] }}", max_active_tis_per_dag=4)
    def validate_node(target: dict) -> dict:
        """Self-test, DCGM diagnostic, GPU memory and bandwidth of one node; uncordon it when all pass."""
        from acme_airflow.validation import validate_in_task

        return validate_in_task(target)

    @task(trigger_rule="none_failed")
    def summarize(outcomes: list[dict] | None) -> dict:
        """Which nodes returned to service and which stay cordoned (and why)."""
        from acme.recovery.validation import summarize_outcomes

        return summarize_outcomes(list(outcomes or []))

    summarize(validate_node.expand(target=find_cordoned()))


validate_nodes()
