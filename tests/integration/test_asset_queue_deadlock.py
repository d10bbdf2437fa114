"""Consumer-run queueing under concurrent Asset events, on a real Postgres (docs/reliability.md).

Two task instances emitting the same Asset at once each insert one ``asset_dag_run_queue`` row
per consumer DAG in one statement. Airflow 3.3.2 inserts them in a ``set``'s order, which differs
between processes: opposite orders deadlock. ``OrderedAssetManager`` (``[core]
asset_manager_class``) inserts them by DAG id. The rounds below run Airflow's own insert through
the base manager with opposite orders (the control: it must deadlock, or the test proves nothing)
and through ours with the same inputs (it must never deadlock).
"""

from __future__ import annotations

import threading
import uuid

import pytest
from airflow.assets.manager import AssetManager  # before ours: Airflow's module loads it by configuration
from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from acme_airflow.asset_manager import CLASS_PATH, OrderedAssetManager, by_dag_id

CONSUMERS = 200  # consumer DAG ids per event: many rows per statement make the orders collide
ROUNDS = 8


class Dag:
    def __init__(self, dag_id: str):
        self.dag_id = dag_id


@pytest.fixture
def queue_db():
    """A fresh Postgres database holding Airflow's ``asset_dag_run_queue`` table (no foreign keys)."""
    name = f"acme_adrq_{uuid.uuid4().hex[:10]}"
    admin = create_engine(
        "postgresql+psycopg2://postgres@127.0.0.1:5432/postgres", isolation_level="AUTOCOMMIT"
    )
    with admin.connect() as connection:
        connection.execute(text(f"CREATE DATABASE {name}"))
    engine = create_engine(f"postgresql+psycopg2://postgres@127.0.0.1:5432/{name}", pool_size=4)
    with engine.begin() as connection:
        connection.execute(
            text(
                "CREATE TABLE asset_dag_run_queue (asset_id integer NOT NULL, target_dag_id varchar(250) NOT NULL,"
                " created_at timestamptz NOT NULL, PRIMARY KEY (asset_id, target_dag_id))"
            )
        )
    try:
        yield engine
    finally:
        engine.dispose()
        with admin.connect() as connection:
            connection.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        admin.dispose()


def race(engine, manager, asset_id: int, orders: list[list[Dag]]) -> list[str]:
    """Each order in its own transaction, all started together; the errors they ended with."""
    barrier = threading.Barrier(len(orders))
    errors: list[str] = []

    def publish(dags: list[Dag]) -> None:
        with Session(engine) as session:
            session.execute(text("SELECT 1"))  # connect before the barrier
            barrier.wait()
            try:
                manager._queue_dagruns_nonpartitioned_postgres(asset_id, dags, session)
                session.execute(text("SELECT pg_sleep(0.05)"))  # the rest of the task's transaction
                session.commit()
            except OperationalError as error:
                session.rollback()
                errors.append(str(error.orig).splitlines()[0])

    threads = [threading.Thread(target=publish, args=(order,)) for order in orders]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def test_queue_rows_are_inserted_in_dag_id_order_whatever_the_set_order():
    dags = {Dag(f"consumer_{n:03d}") for n in range(50)}
    assert [d.dag_id for d in by_dag_id(dags)] == sorted(d.dag_id for d in dags)
    assert f"{OrderedAssetManager.__module__}.{OrderedAssetManager.__name__}" == CLASS_PATH


def test_concurrent_events_deadlock_airflow_s_manager_but_never_the_ordered_one(queue_db):
    from airflow.models import import_all_models

    import_all_models()  # the ORM table's foreign keys name the other models' tables
    dags = [Dag(f"consumer_{n:03d}") for n in range(CONSUMERS)]
    opposite = [dags, list(reversed(dags))]
    base_deadlocks = ordered_deadlocks = 0
    for asset_id in range(ROUNDS):
        base_deadlocks += sum("deadlock" in e for e in race(queue_db, AssetManager, 2 * asset_id, opposite))
        errors = race(queue_db, OrderedAssetManager, 2 * asset_id + 1, opposite)
        assert errors == [], errors
        ordered_deadlocks += len(errors)
    with queue_db.connect() as connection:
        queued = connection.execute(
            text("SELECT count(*) FROM asset_dag_run_queue WHERE asset_id % 2 = 1")
        ).scalar_one()
    print(f"deadlocks in {ROUNDS} rounds: Airflow's manager {base_deadlocks}, ordered {ordered_deadlocks}")
    assert queued == ROUNDS * CONSUMERS  # every consumer queued once per event, none lost
    assert base_deadlocks > 0, (
        "the control never deadlocked: the race did not happen, the test proves nothing"
    )


def test_every_deployment_we_ship_uses_the_ordered_manager(tmp_path):
    """The api-server registers the events: each way of running it must load the ordered manager."""
    from pathlib import Path

    import yaml
    from stack.stack import StackSettings, stack_env

    root = Path(__file__).resolve().parents[2]
    compose = yaml.safe_load((root / "docker-compose.yaml").read_text())
    assert (
        compose["services"]["api-server"]["environment"]["AIRFLOW__CORE__ASSET_MANAGER_CLASS"] == CLASS_PATH
    )
    assert (
        stack_env(StackSettings(home=tmp_path / "stack", password="test"))[
            "AIRFLOW__CORE__ASSET_MANAGER_CLASS"
        ]
        == CLASS_PATH
    )
    assert f"export AIRFLOW__CORE__ASSET_MANAGER_CLASS := {CLASS_PATH}" in (root / "Makefile").read_text()

    from airflow.assets.manager import resolve_asset_manager

    assert type(resolve_asset_manager()) is OrderedAssetManager  # the tests' own Airflow (tests/conftest.py)
