"""The settings module: checked reading of the environment, and the one place ``ACME_*`` is read."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from acme import settings
from acme.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]

# A read: os.environ / os.getenv / an env helper with an ACME_ name on the same line, or os.environ read by
# a variable `name` (a loop over ACME_ names).
READ = re.compile(
    r"(os\.environ|os\.getenv|\b_?env(?:_number)?\(|\.text\(|\.number\(|\.flag\()[^\n]*[\"']ACME_"
    r"|os\.environ(?:\.get)?[\[(]name\b"
)


def test_text_and_defaults():
    env = settings.Env({"ACME_X": "  value  ", "ACME_BLANK": "  "})
    assert env.text("ACME_X") == "value"
    assert env.text("ACME_BLANK", "default") == "default"
    assert env.text("ACME_UNSET", "default") == "default"


@pytest.mark.parametrize(
    ("raw", "message"),
    [("abc", "is not a number"), ("1.5", "must be between 0 and 1"), ("-1", "must be between 0 and 1")],
)
def test_a_bad_number_names_the_variable_and_its_value(raw, message):
    with pytest.raises(ConfigError, match=rf"ACME_SHARE='{re.escape(raw)}' {message}"):
        settings.Env({"ACME_SHARE": raw}).share("ACME_SHARE", 0.5)


def test_integer_flag_and_choice():
    env = settings.Env({"ACME_N": "3", "ACME_ON": "Yes", "ACME_OFF": "0", "ACME_BAD": "maybe", "ACME_C": "B"})
    assert env.integer("ACME_N", 1, low=1) == 3
    with pytest.raises(ConfigError, match="is not an integer"):
        settings.Env({"ACME_N": "2.5"}).integer("ACME_N", 1)
    assert env.flag("ACME_ON") is True
    assert env.flag("ACME_OFF", True) is False
    assert env.flag("ACME_UNSET", True) is True
    with pytest.raises(ConfigError, match="ACME_BAD='maybe' must be true or false"):
        env.flag("ACME_BAD")
    assert env.choice("ACME_C", "a", ("a", "b")) == "b"
    with pytest.raises(ConfigError, match="must be one of a, b"):
        settings.Env({"ACME_C": "z"}).choice("ACME_C", "a", ("a", "b"))


def test_project_settings_follow_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("ACME_INCLUDE_DIR", str(tmp_path))
    monkeypatch.setenv("ACME_START_DATE", "2023-07-01")
    monkeypatch.setenv("ACME_MAX_ACTIVE_RUNS", "2")
    monkeypatch.delenv("ACME_CLUSTERS_FILE", raising=False)
    project = settings.project()
    assert project.clusters_file == tmp_path / "config" / "clusters.yaml"
    assert project.sql_dir == tmp_path / "sql"
    assert project.start_date == datetime(2023, 7, 1, tzinfo=UTC)
    assert project.max_active_runs == 2
    monkeypatch.setenv("ACME_MAX_ACTIVE_RUNS", "0")
    with pytest.raises(ConfigError, match="ACME_MAX_ACTIVE_RUNS='0' must be at least 1"):
        settings.project()


def test_settings_are_frozen():
    project = settings.project()
    with pytest.raises(AttributeError):
        project.lake_uri = "elsewhere"  # type: ignore[misc]


def test_only_the_settings_module_reads_acme_variables():
    readers = set()
    for path in [*ROOT.glob("plugins/**/*.py"), *ROOT.glob("dags/*.py")]:
        relative = path.relative_to(ROOT).as_posix()
        if relative != "plugins/acme/settings.py" and READ.search(path.read_text()):
            readers.add(relative)
    assert not readers, f"read ACME_* outside acme/settings.py: {sorted(readers)}"


def test_the_check_finds_a_read():
    assert READ.search('    raw = os.environ.get("ACME_X", "")')
    assert READ.search('    value = env("ACME_X", "1")')
    assert READ.search("        raw = os.environ.get(name, '')")
    assert not READ.search('    """The lake root (``ACME_LAKE_URI``)."""')


def test_cluster_access_is_set_once_for_every_area_and_an_area_may_override_it():
    shared = {
        "ACME_KUBERNETES_CONN_ID": "k8s_prod",
        "ACME_KUBERNETES_NAMESPACE": "llm-train",
        "ACME_GPU_POD_IMAGE": "registry.internal/acme/gpu:2026.12",
        "ACME_SLURM_COMMAND_PREFIX": "ssh seren-login",
        "ACME_SLURM_PARTITION": "debug",
        "ACME_SLURM_PYTHON": "/nfs/venv/bin/python",
    }
    evaluation = settings.EvaluationSettings.from_env(shared)
    recovery = settings.RecoverySettings.from_env(shared)
    assert evaluation.gpu_pod_image == recovery.check_image == "registry.internal/acme/gpu:2026.12"
    assert evaluation.gpu_pod_namespace == recovery.namespace == "llm-train"
    assert evaluation.gpu_pod_kubernetes_conn_id == recovery.kubernetes_conn_id == "k8s_prod"
    assert recovery.slurm_command_prefix == ("ssh", "seren-login")
    assert (recovery.slurm_partition, recovery.slurm_python) == ("debug", "/nfs/venv/bin/python")
    own = settings.RecoverySettings.from_env(
        {
            **shared,
            "ACME_RECOVERY_NAMESPACE": "checks",
            "ACME_RECOVERY_SLURM_COMMAND_PREFIX": "ssh kalos-login",
        }
    )
    assert (own.namespace, own.slurm_command_prefix) == ("checks", ("ssh", "kalos-login"))
    assert (
        settings.EvaluationSettings.from_env(shared).gpu_pod_namespace == "llm-train"
    )  # the other area keeps it
    defaults = settings.RecoverySettings.from_env({})
    assert defaults.check_image == settings.EvaluationSettings.from_env({}).gpu_pod_image
    assert (defaults.namespace, defaults.slurm_command_prefix, defaults.slurm_python) == (
        "training",
        (),
        "python3",
    )
    with pytest.raises(ConfigError, match="ACME_KUBERNETES_NAMESPACE='Not_A_Name'"):
        settings.RecoverySettings.from_env({"ACME_KUBERNETES_NAMESPACE": "Not_A_Name"})
