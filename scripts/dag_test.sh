#!/usr/bin/env bash
# Run one DAG run in-process (`airflow dags test`) for the demo; print its final state and log path,
# and fail with the log's tail when the run did not succeed.
#   scripts/dag_test.sh LABEL DAG_ID LOGICAL_DATE CONF_JSON
set -uo pipefail
label=$1 dag_id=$2 logical_date=$3 conf=$4
log="${AIRFLOW_HOME:?}/demo-${label}.log"
# `airflow dags test` of a DAG with a DeadlineAlert fails after its run succeeded in Airflow 3.3.2
# (apache/airflow#73428: dag.test() hands the encoded alerts to the deadline clean-up); the demo's
# in-process runs have no scheduler to fire a deadline anyway.
export ACME_NOTIFY_DEADLINE_HOUR=off
"${VENV:?}/bin/airflow" dags test "$dag_id" "$logical_date" -c "$conf" > "$log" 2>&1
state=$(grep -o "DagRun Finished.*" "$log" | grep -o "state=[a-z]*" | tail -1 | cut -d= -f2)
echo "  $dag_id ($label): ${state:-did not finish} (log: $log)"
# `airflow dags test` starts its run at the logical date (Airflow 3.3.2's DAG.test passes
# start_date=logical_date), so the UI's run duration of a demo day counts from 2023: 1,248 days.
# The run keeps its logical date (the demo's data day) and gets its true start, its first task's.
"$VENV/bin/python" - "$dag_id" "$logical_date" >> "$log" 2>&1 <<'PY' || echo "  (the run's start date was not corrected: see $log)"
import sys

import pendulum
from sqlalchemy import func, select

from airflow.models import DagRun, TaskInstance
from airflow.utils.session import create_session

with create_session() as session:
    logical_date = pendulum.parse(sys.argv[2], tz="UTC")
    run = session.scalars(
        select(DagRun).where(DagRun.dag_id == sys.argv[1], DagRun.logical_date == logical_date)
    ).first()
    first = run and session.scalar(
        select(func.min(TaskInstance.start_date)).where(
            TaskInstance.dag_id == run.dag_id, TaskInstance.run_id == run.run_id
        )
    )
    if first is not None and run.start_date is not None and run.start_date < first:
        print(f"dag_test.sh: run {run.run_id} starts at {first} (was {run.start_date}, its logical date)")
        run.start_date = first
PY
if [ "$state" != success ]; then tail -40 "$log"; exit 1; fi
