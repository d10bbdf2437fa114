"""Property-based tests of every DAG's Params and the plan step each DAG's first task runs (Hypothesis).

For each DAG of ``dags/``, values are generated for its Params -- the defaults, plausible values, and
hostile strings: ``..`` traversals, absolute paths, NUL bytes, URLs, very long strings, unicode
lookalikes (fullwidth digits, a Cyrillic ``а``, U+2028), wrong types -- and validated with the DAG's own
Param schema (``Param.resolve``, as Airflow does when a run is triggered). For the values the schema
accepts, the function the DAG's first task calls gets them as the task would hand them over:

- ``ingest_job_traces``: ``acme.jobs.ingest.plan_job_inputs``;
- ``ingest_metrics``: ``acme.metrics.ingest.plan_metric_inputs``;
- ``diagnose_failures``: ``diagnosis_targets`` and ``plan_diagnoses``, then ``locate_logs`` for every
  planned job (where a ``log`` Param becomes a path);
- ``recover_training``: ``acme_airflow.recovery.request_from_context`` (the request check);
- ``evaluate_checkpoint``: ``request_from`` and the dry-run plan (``simulate_evaluation``);
- ``characterize``: ``acme.report.build.plan_reports``.

The properties: the result is a plan or ``ConfigError``/``InputError`` (a clear refusal the DAG turns into
a failure without retries), never another exception; and no path a plan or request holds resolves
outside its configured root (the lake, the log root, the include folder, the checkpoint location).
"""

from __future__ import annotations

import copy
import os
from datetime import UTC, date, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from acme.errors import ConfigError, InputError
from tests.unit.property.campaign import SETTINGS

ROOT = Path(__file__).resolve().parents[3]
RUN_AFTER = datetime(2023, 7, 2, 4, 0, tzinfo=UTC)

hostile_text = st.one_of(
    st.sampled_from(
        [
            "", " ", "all", "seren", "kalos", "SEREN", "seren ", "ѕeren", "sеren", "seren\x00", "seren\u2028",
            "../seren", "..", "../../etc/passwd", "/etc/passwd", "/", "//", "\\..\\..\\windows", "~/x",
            "file:///etc/passwd", "s3://other-bucket/x", "http://169.254.169.254/latest/meta-data",
            "logs/../../etc/passwd", "cluster=seren/job=1/../../../../x", "a/./b", "%2e%2e%2f", "\x00",
            "/../../../elsewhere", "seren/../../../elsewhere", "../outside.log", "../../../etc/passwd", "cluster=seren/job=1/train.log", "job=1/../../../outside.log",
            "2023-07-01", "2023-07", "2023-07-01\n", "２０２３-07-01", "2023-02-29", "2023-13-01", "all\n",
            "0", "-1", "7B", "0B", "1e400", "9" * 400 + "B", " 7 b ", "tiny", "default", "acmetrace", "sacct",
            "k8s", "configured", "prometheus", "exporter-text", "acmetrace-csv", "$(id)", "; rm -rf /",
            "x" * 5_000, "seren-n000", "job-1", "2023-07-01T03:00:00+00:00", "2023-07-01T03:00:00",
        ]
    ),
    st.text(max_size=30),
    st.text(alphabet="./\\abc-_=:*?[]%\x00", max_size=20),
)  # fmt: skip
hostile_value = st.one_of(
    hostile_text,
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.lists(hostile_text, max_size=4),
    st.dictionaries(st.text(max_size=5), hostile_text, max_size=2),
)


def load_dags() -> dict:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags"))
    assert not bag.import_errors, bag.import_errors
    return bag.dags


@pytest.fixture(scope="module")
def dags():
    return load_dags()


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    """A lake with a log under the log root and a file just outside it (what a traversal would reach)."""
    from acme.lake import Lake

    root = tmp_path_factory.mktemp("params")
    lake_root = root / "lake"
    log = lake_root / "logs" / "cluster=seren" / "job=1" / "train.log"
    log.parent.mkdir(parents=True)
    log.write_text("RuntimeError: CUDA error: an illegal memory access was encountered\n")
    (root / "outside.log").write_text("not for a Param to reach\n")
    import pyarrow as pa
    import pyarrow.parquet as pq

    jobs = pa.table({"job_id": ["1", "2"], "state_group": ["failed", "completed"]})
    for partition in (lake_root / "jobs" / "cluster=seren", root / "elsewhere"):
        (partition / "date=2023-06-01").mkdir(parents=True)
        pq.write_table(jobs, partition / "date=2023-06-01" / "jobs.parquet")
    return Lake(str(lake_root))


@pytest.fixture(autouse=True)
def _settings(lake, monkeypatch):
    monkeypatch.setenv("ACME_LAKE_URI", lake.uri)
    for name in ("ACME_DIAGNOSIS_LOG_PATTERN", "ACME_DIAGNOSIS_LOG_ROOT"):
        monkeypatch.delenv(name, raising=False)


def accepted_params(dag, overrides: dict) -> dict | None:
    """The run's params after the DAG's schema checked them, or None where the schema refuses one."""
    from airflow.sdk.definitions.param import ParamValidationError

    resolved = {}
    for name, param in dag.params.items():
        param = copy.deepcopy(param)
        try:
            resolved[name] = param.resolve(overrides[name]) if name in overrides else param.resolve()
        except ParamValidationError:
            return None
    return resolved


def value_for(schema: dict) -> st.SearchStrategy:
    """Values of the Param's own type (hostile ones for strings); one in ten overrides is any value."""
    types = schema.get("type") or ["string"]
    types = [types] if isinstance(types, str) else types
    typed = {
        "string": hostile_text,
        "null": st.none(),
        "array": st.lists(hostile_text, max_size=10),
        "integer": st.one_of(st.integers(-3, 300), st.sampled_from([2**31, 2**63])),
        "boolean": st.booleans(),
    }
    if "enum" in schema:
        typed["string"] = st.sampled_from(schema["enum"])
    elif schema.get("format") == "date":
        typed["string"] = st.dates(date(1970, 1, 1), date(2100, 12, 31)).map(date.isoformat)
    elif "pattern" in schema:
        typed["string"] = st.from_regex(schema["pattern"])  # "$" lets a trailing newline through
    return st.one_of([typed[t] for t in types if t in typed] or [hostile_text])


@st.composite
def overrides_for(draw, params) -> dict:
    chosen = draw(st.lists(st.sampled_from(sorted(params)), unique=True, max_size=len(params)))
    return {
        name: draw(
            hostile_value if draw(st.integers(0, 9)) == 0 else value_for(params.get_param(name).schema)
        )
        for name in chosen
    }


def context_for(params: dict) -> dict:
    return {
        "params": params,
        "run_id": "manual__2023-07-02T04:00:00+00:00",
        "dag_run": SimpleNamespace(run_after=RUN_AFTER, conf=params),
        "data_interval_start": None,
    }


def inside(path: str, root: str | Path) -> bool:
    real, real_root = os.path.realpath(path), os.path.realpath(root)
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


def run_plan(dag_id: str, params: dict, lake) -> object:
    """What the DAG's first task computes from its params (see the module docstring)."""
    from acme.clusters import load_clusters
    from acme_airflow.context import run_day

    context = context_for(params)
    if dag_id == "ingest_job_traces":
        from acme.jobs.ingest import plan_job_inputs

        planned = plan_job_inputs(
            load_clusters(), run_day(context), params["cluster"], params["source"], params.get("input")
        )
        for item in planned:
            if not params.get("input"):
                assert inside(item["input"]["uri"], ROOT / "include"), item
        return planned
    if dag_id == "ingest_metrics":
        from acme.metrics.ingest import plan_metric_inputs

        return plan_metric_inputs(
            load_clusters(), run_day(context), params["cluster"], params["source"], params.get("input")
        )
    if dag_id == "diagnose_failures":
        from acme.diagnosis.nightly import diagnosis_targets, plan_run
        from acme.diagnosis.pipeline import locate_logs

        targets = diagnosis_targets(
            load_clusters(), params["cluster"], run_day(context), [],
            manual=bool(params.get("day") or params.get("job_id")),
        )  # fmt: skip
        plan = plan_run(lake, targets, run_id="fuzz", job_id=params.get("job_id"), log=params.get("log"))
        stored = lake.read_json(plan["plan"])
        for item in stored["without_log"] + [i for chunk in stored["chunks"] for i in chunk]:
            files, _ = locate_logs(
                lake, item["cluster"], item["job"], item["log"], date.fromisoformat(item["day"])
            )
            # In the lake, (lake, key) pairs: the key must be under logs/; elsewhere, filesystem paths.
            assert all(
                path.startswith("logs/") if src is lake else inside(path, Path(lake.root) / "logs")
                for src, path in files
            ), files
        return plan
    if dag_id == "recover_training":
        from acme.lake import open_lake
        from acme_airflow.recovery import request_from_context

        request = request_from_context(context, lake)
        if request.metrics_file:
            checkpoints = open_lake(request.checkpoint_uri)
            if checkpoints.is_local:
                assert inside(checkpoints.path(request.metrics_file), checkpoints.root), request
        return request
    if dag_id == "evaluate_checkpoint":
        from acme.evaluation.evaluation_run import request_from, simulate_evaluation

        request = request_from(params, {}, 8)
        return simulate_evaluation(request) if params["dry_run"] else request
    if dag_id == "characterize":
        from acme.report.build import plan_reports

        clusters = sorted(load_clusters()) if params["cluster"] == "all" else [params["cluster"]]
        plans = plan_reports(lake, clusters, [], RUN_AFTER.date(), params["period"])
        for planned in plans:
            assert planned["cluster"] in load_clusters(), planned
        return plans
    if dag_id == "detect_hangs":
        from acme.detection.run import clusters_with_running_jobs, detection_moment

        return clusters_with_running_jobs(
            lake, params["cluster"], detection_moment(params.get("at"), None, RUN_AFTER)
        )
    if dag_id == "validate_nodes":
        from acme.recovery.backends import make_backend
        from acme.recovery.validation import nodes_to_validate

        cluster = None if params["cluster"] == "all" else params["cluster"]
        return nodes_to_validate(
            lake,
            cluster,
            list(params["nodes"]),
            lambda name: make_backend(name, lake),
            bool(params["allow_lemon"]),
        )
    raise AssertionError(f"no plan step known for DAG {dag_id}: add it to this test")


DAG_IDS = [
    "ingest_job_traces", "ingest_metrics", "diagnose_failures", "recover_training", "evaluate_checkpoint",
    "characterize", "detect_hangs", "validate_nodes",
]  # fmt: skip


# Values a manual run must give (their defaults are empty), so that most runs get past the first check.
PLAUSIBLE = {
    "recover_training": {"checkpoint_uri": "/data/ckpt/run-1"},
    "evaluate_checkpoint": {"model_location": "s3://models/run-1/step_1000"},
}


def test_every_dag_with_params_is_covered(dags):
    assert sorted(dag_id for dag_id, dag in dags.items() if dag.params) == sorted(DAG_IDS)


@pytest.mark.parametrize("dag_id", DAG_IDS)
@SETTINGS
@given(data=st.data())
def test_params_accepted_by_the_schema_give_a_plan_or_a_clear_refusal(dags, lake, dag_id, data):
    dag = dags[dag_id]
    overrides = {**PLAUSIBLE.get(dag_id, {}), **data.draw(overrides_for(dag.params))}
    params = accepted_params(dag, overrides)
    if params is None:
        event("refused by the Param schema")
        return
    try:
        run_plan(dag_id, params, lake)
    except (ConfigError, InputError) as refusal:
        assert str(refusal).strip()
        event(f"refused: {type(refusal).__name__}")
        return
    event("planned")


# --------------------------------------------------------------------------- regressions


def test_a_report_cluster_param_cannot_leave_the_lake(lake):
    """Regression: ``characterize`` passed its ``cluster`` Param unchecked to ``plan_reports``, whose lake
    listing ``jobs/cluster=seren/../../../elsewhere`` left the lake (and the report would be written there)."""
    from acme.report.build import plan_reports

    with pytest.raises(ConfigError, match="not a cluster name"):
        plan_reports(lake, ["seren/../../../elsewhere"], [], RUN_AFTER.date(), "all")
    assert plan_reports(lake, ["seren"], [], RUN_AFTER.date(), "all") == [
        {"cluster": "seren", "period": "all"}
    ]


def test_a_report_period_with_a_trailing_newline_plans_its_plain_label(lake, dags):
    """Regression: the Param pattern's ``$`` lets ``"2023-06\\n"`` through; the planned report (and so its
    lake path) carried the newline."""
    from acme.report.build import plan_reports

    period = accepted_params(dags["characterize"], {"period": "2023-06\n"})["period"]
    assert plan_reports(lake, ["seren"], [], RUN_AFTER.date(), period) == [
        {"cluster": "seren", "period": "2023-06"}
    ]


@pytest.mark.parametrize(
    "metrics_file", ["../../../etc/passwd", "/etc/passwd", "a/../../x", "s3://b/m.csv", "m\x00"]
)
def test_a_metrics_file_param_cannot_leave_the_checkpoint_location(dags, metrics_file, tmp_path):
    """Regression: ``metrics_file`` is read relative to the checkpoint location; ``..`` reached any file."""
    from acme.lake import Lake
    from acme_airflow.recovery import request_from_context

    lake = Lake(str(tmp_path / "lake"))  # where a request that cannot be made is recorded

    overrides = {"checkpoint_uri": "/data/ckpt/run-1", "metrics_file": metrics_file,
                 "job_id": "job-1", "nodes": ["n1"]}  # fmt: skip
    params = accepted_params(dags["recover_training"], overrides)
    with pytest.raises(InputError, match="metrics_file"):
        request_from_context(context_for(params), lake)
    params = accepted_params(dags["recover_training"], {**overrides, "metrics_file": "logs/metrics.csv"})
    assert request_from_context(context_for(params), lake).metrics_file == "logs/metrics.csv"


def test_a_model_size_past_float_range_is_refused_not_a_hang(dags):
    import subprocess
    import sys

    params = accepted_params(dags["evaluate_checkpoint"], {"model_size": "9" * 400 + "B", "dry_run": True})
    assert params is not None, "the Param pattern accepts it"
    script = (
        "from acme.errors import ConfigError\n"
        "from acme.evaluation.evaluation_run import request_from, simulate_evaluation\n"
        f"params = {params!r}\n"
        "try:\n    simulate_evaluation(request_from(params, {}, 8))\n"
        "except ConfigError as error:\n    print('refused:', error)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "plugins")}
    try:
        done = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=30
        )
    except subprocess.TimeoutExpired:
        pytest.fail("simulate_evaluation did not return within 30 s")
    assert done.returncode == 0 and "refused:" in done.stdout, done.stderr[-2000:]
