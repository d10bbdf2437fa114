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
if [ "$state" != success ]; then tail -40 "$log"; exit 1; fi
