"""Airflow's asset manager with the queue rows written in one order (``[core] asset_manager_class``).

When a task emits an Asset event, Airflow inserts one ``asset_dag_run_queue`` row per consumer
DAG, in the iteration order of a Python ``set`` of DAG models — an order that differs between
processes. Two task instances emitting the same Asset at once (the per-cluster publish tasks of
one nightly run, or two backfill runs) then take the rows' locks in opposite orders and Postgres
aborts one of them as a deadlock; Airflow 3.3.2's api-server marks that task instance failed,
without a retry, although its data is published (seen in our CI: docs/reliability.md).

Inserting the rows sorted by DAG id makes every transaction take the locks in the same order, so
the second one waits instead of deadlocking. This is the upstream fix (apache/airflow#70128,
"Fix deadlock when concurrent tasks queue the same asset's downstream dags"), which 3.3.2 does not
have; drop this class when the pinned Airflow includes it.

Enabled by ``AIRFLOW__CORE__ASSET_MANAGER_CLASS=acme_airflow.asset_manager.OrderedAssetManager``
(Makefile, stack/stack.py, docker-compose.yaml, tests). Airflow imports this module from
``airflow.assets.manager`` while loading that one; code of ours importing it must import
``airflow.assets.manager`` first.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from airflow.assets.manager import AssetManager

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

CLASS_PATH = "acme_airflow.asset_manager.OrderedAssetManager"


def by_dag_id(dags: Iterable[Any]) -> list[Any]:
    """The consumer DAG models in one order, the same in every process."""
    return sorted(dags, key=lambda dag: dag.dag_id)


class OrderedAssetManager(AssetManager):
    """``AssetManager`` that queues consumer DAG runs in DAG-id order (see the module docstring)."""

    @classmethod
    def _queue_dagruns_nonpartitioned_postgres(
        cls, asset_id: int, dags_to_queue: Any, session: Session
    ) -> None:
        super()._queue_dagruns_nonpartitioned_postgres(asset_id, by_dag_id(dags_to_queue), session)

    @classmethod
    def _queue_dagruns_nonpartitioned_slow_path(
        cls, asset_id: int, dags_to_queue: Any, session: Session
    ) -> None:
        super()._queue_dagruns_nonpartitioned_slow_path(asset_id, by_dag_id(dags_to_queue), session)
