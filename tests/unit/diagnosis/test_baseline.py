"""The diff against the last good run of the same job family (issue 31, item 2): the lines new in the failed
run rank first in what the agent is sent. Measured on the corpus by benchmarks/bench_diagnosis_baseline.py."""

from __future__ import annotations

import gzip

from acme.diagnosis.baseline import baseline_keys, baseline_keys_of_log, novel_lines
from acme.diagnosis.compress import compress_log
from acme.diagnosis.llm_agent import FailureAgent
from acme.diagnosis.llm_endpoint import LLMEndpoint
from acme.diagnosis.untrusted import parse_log_text, select_log_lines

GOOD = [
    "[rank0]: step 100 | loss 2.31 | 1.2 s/it",
    "[rank1]: WARNING: gradient overflow, skipping step 101",
    "Saving checkpoint to /scratch/u/run-7/ckpt-200",
    "NCCL WARN Cuda failure 'out of memory' on rank 3 (retrying)",
]
FAILED = [
    "[rank0]: step 900 | loss 2.05 | 1.3 s/it",
    "[rank3]: WARNING: gradient overflow, skipping step 901",
    "NCCL WARN Cuda failure 'out of memory' on rank 5 (retrying)",
    "Saving checkpoint to /scratch/u/run-8/ckpt-1000",
    "OSError: [Errno 122] Disk quota exceeded",
]


def test_lines_the_good_run_printed_are_not_new():
    keys = baseline_keys(GOOD)
    kept = list(enumerate(FAILED, start=1))
    # Other ranks, numbers and paths do not make a line new; the quota error is.
    assert novel_lines(kept, keys) == {5}


def test_new_lines_are_sent_to_the_agent_first(tmp_path):
    good = tmp_path / "good.log"
    good.write_text("\n".join(GOOD) + "\n", encoding="utf-8")
    compressed = compress_log(FAILED)
    novel = novel_lines(((k.line, k.text) for k in compressed.lines), baseline_keys_of_log(good))
    lines = parse_log_text(compressed.to_text())
    # With one line of budget, today's selection sends the earliest error line (the retried NCCL warning);
    # with the diff, the line the good run never printed.
    today, _ = select_log_lines(lines, max_lines=1, max_chars=10_000)
    with_diff, _ = select_log_lines(lines, max_lines=1, max_chars=10_000, novel=novel)
    assert [ln.number for ln in today] == [3]
    assert [ln.number for ln in with_diff] == [5]
    agent = FailureAgent(LLMEndpoint(base_url="http://127.0.0.1:9", model="none"), max_log_lines=1)
    messages, shown = agent.build_messages(compressed.to_text(), [], None, novel)
    assert [ln.number for ln in shown] == [5]
    assert "new since the last good run first" in messages[-1]["content"]
    _, unchanged = agent.build_messages(compressed.to_text(), [], None)
    assert [ln.number for ln in unchanged] == [3]


class _FakeAgentThatRecords:
    """A fake agent (no model runs here): records what the pipeline sends, then is unavailable."""

    def __init__(self):
        self.novel = "not given"

    def diagnose(self, text, similar, job, novel=None):
        from acme.diagnosis.llm_agent import AgentUnavailable

        self.novel = novel
        raise AgentUnavailable("fake agent")


def test_the_pipeline_sends_the_new_lines_to_a_fake_agent(tmp_path):
    from acme.diagnosis.pipeline import diagnose_log_lines

    failed = [
        *FAILED[:4],
        "FluxCapacitorFault: flux exhausted on rank 2",
    ]  # no rule knows it: the agent is asked
    agent = _FakeAgentThatRecords()
    record = diagnose_log_lines(
        failed, {"job_id": "j-9"}, cluster="seren", agent=agent, baseline=baseline_keys(GOOD)
    )
    assert agent.novel == {5}
    from_file = _FakeAgentThatRecords()
    good = tmp_path / "good.log.gz"
    good.write_bytes(gzip.compress(("\n".join(GOOD) + "\n").encode()))
    diagnose_log_lines(failed, {"job_id": "j-9"}, cluster="seren", agent=from_file, baseline=good)
    assert from_file.novel == {5}  # the good run's log file itself
    assert "1 of 5 kept lines are new since the last good run" in (record.note or "")
    without = _FakeAgentThatRecords()
    diagnose_log_lines(failed, {"job_id": "j-9"}, cluster="seren", agent=without)
    assert without.novel is None  # no baseline: the agent is called as before
