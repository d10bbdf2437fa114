"""The characterize DAG's lemon-node step run by Airflow (dag.test): the report's section 11, the suggestion record,
the on-call notice, and a cordon only when ACME_LEMON_AUTO_CORDON is on."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from tests.dags.test_characterize import run_characterize
from tests.lemon_support import NODES, simulated_jobs_file, write_history

pytestmark = pytest.mark.airflow


@pytest.fixture
def lemon_lake(lake_dir, tmp_path, monkeypatch):
    from acme.lake import Lake

    write_history(Lake(str(lake_dir)), tmp_path)
    monkeypatch.setenv("ACME_RECOVERY_BACKEND", "simulated")
    monkeypatch.setenv("ACME_RECOVERY_SIMULATED_JOBS", str(simulated_jobs_file(tmp_path)))
    monkeypatch.setenv("ACME_LEMON_MIN_SCORE", "0.1")
    return lake_dir


def today_run() -> tuple[str, str]:
    now = datetime.now(UTC)
    return now.strftime("%Y-%m-%dT%H:00:00"), now.date().isoformat()


def cordoned(lake_dir) -> list[str]:
    return sorted(
        json.loads((lake_dir / "recovery/simulated/cluster=seren/state.json").read_text())["cordoned"]
    )


def test_the_nightly_run_suggests_the_lemon_nodes_and_reports_them(airflow_db, lemon_lake, monkeypatch):
    monkeypatch.delenv("ACME_LEMON_AUTO_CORDON", raising=False)
    logical, day = today_run()
    assert run_characterize(logical, cluster="seren", period="all").state == "success"
    record = json.loads((lemon_lake / f"recovery/lemon/cluster=seren/date={day}/suggestion.json").read_text())
    assert [s["node"] for s in record["suggested"]] == ["gpu03", "gpu04"] and record["auto_cordon"] is False
    assert cordoned(lemon_lake) == ["gpu03"]  # only the recovery's own cordon
    (notice,) = [json.loads(p.read_text()) for p in (lemon_lake / "notify/queue").rglob("lemon-*.json")]
    assert notice["recipient"] == "oncall" and "gpu04" in notice["text"]
    report = lemon_lake / "reports/cluster=seren/period=all"
    table = json.loads((report / "tables/lemon_nodes.json").read_text())
    # As of the report's last day (job 104's submit day), before its recovery localized gpu03: the failure is
    # spread over the job's 8 nodes there.
    assert table[0]["node"] == "gpu03" and table[0]["suggest_cordon"] is True
    assert sorted(row["node"] for row in table) == NODES
    assert "11. Lemon nodes: repeat offenders" in (report / "index.html").read_text()


def test_with_auto_cordon_on_the_run_cordons_the_suggested_node(airflow_db, lemon_lake, monkeypatch):
    monkeypatch.setenv("ACME_LEMON_AUTO_CORDON", "on")
    logical, _ = today_run()
    assert run_characterize(logical, cluster="seren", period="all").state == "success"
    assert cordoned(lemon_lake) == ["gpu03", "gpu04"]


def test_the_on_call_notice_arrives_at_a_real_smtp_server_once_and_a_re_run_sends_nothing(
    airflow_db, lemon_lake, tmp_path, monkeypatch
):
    from tests.notify_support import smtp_connection, smtp_server

    monkeypatch.delenv("ACME_LEMON_AUTO_CORDON", raising=False)
    routing = tmp_path / "notify.yaml"
    routing.write_text(
        "channels: {mail: {kind: smtp, connection: smtp_lemon_dag}}\n"
        "owners: {channel: mail, domain: seren.acme.example}\n"
        "oncall: {default: {channel: mail, to: oncall@acme.example}}\n"
    )
    monkeypatch.setenv("ACME_NOTIFY_FILE", str(routing))
    logical, _ = today_run()
    with smtp_server() as (mailbox, port):
        monkeypatch.setenv("AIRFLOW_CONN_SMTP_LEMON_DAG", smtp_connection(port))
        assert run_characterize(logical, cluster="seren", period="all").state == "success"
        lemon = [
            (m, body) for m, body in zip(mailbox.messages, mailbox.bodies(), strict=True) if "gpu04" in body
        ]
        assert len(lemon) == 1 and lemon[0][0]["To"] == "oncall@acme.example"
        sent = len(mailbox.messages)
        assert run_characterize(logical, cluster="seren", period="all").state == "success"  # a re-run
        assert len(mailbox.messages) == sent
