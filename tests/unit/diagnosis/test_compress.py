"""Log compression: routine lines dropped, every error and traceback line kept, bounded memory."""

from __future__ import annotations

import csv
import gzip
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from acme.diagnosis.compress import (
    KIND_ERROR,
    KIND_TRACEBACK,
    compress_cli,
    compress_log,
    error_key,
    load_filter_rules,
    parse_filter_rules,
    strip_prefix,
)
from acme.diagnosis.synth_log import SUPPORTED_FAILURES, iter_training_log
from acme.errors import ConfigError

REFERENCE = Path(__file__).resolve().parents[3].parent / "shared" / "reference"
BGL = REFERENCE / "loghub_2k" / "BGL"


def _kept_error_keys(compressed) -> set[str]:
    return {
        error_key(strip_prefix(k.text)[0]) for k in compressed.lines if k.kind in (KIND_ERROR, KIND_TRACEBACK)
    }


def test_filters_drop_routine_lines():
    routine = [
        " iteration      100/  500000 | consumed samples:       102400 | lm loss: 2.345E+00 | grad norm: 0.812 |",
        "[rank3]: Epoch 0:  10%|##        | 50/500 [00:10<01:30,  4.91it/s]\rEpoch 0:  11%|##        | 55/500",
        "node-1:3000:3100 [0] NCCL INFO Channel 00/24 :    0   1   2   3",
        "------------------------ arguments ------------------------",
        "  micro_batch_size ................................ 4",
        "  lr: 0.0003",
        '    "train_batch_size": 1024,',
        "2024-03-14 09:00:03",
        "[2024-03-14 09:00:03,512] [INFO] [logging.py:96:log_dist] [Rank 0] step=10, skipped=0, lr=[3e-4]",
        "{'loss': 2.1, 'learning_rate': 2e-05, 'epoch': 0.1}",
        "step:  10  loss:  9.5381  memory: 30.1GiB(38%)  tps: 3,042  mfu: 40.1%",
    ]
    compressed = compress_log(routine * 50)
    assert compressed.stats["lines_in"] == len(routine) * 50
    assert compressed.stats["lines_out"] == 0
    assert compressed.stats["kept_errors"] == 0


def test_repeated_warnings_keep_first_occurrences():
    warning = (
        "[rank1]: /x/torch/utils/checkpoint.py:464: UserWarning: the use_reentrant parameter should be passed"
    )
    compressed = compress_log([warning] * 100)
    assert compressed.stats["lines_out"] == 1
    assert compressed.templates[0]["count"] == 3  # keep_first: 3, the rest dropped


@pytest.mark.parametrize("failure", ["ECCError", "KeyError", "LossSpike", "NetworkError", "DataloaderKilled"])
def test_every_error_and_traceback_line_is_kept(failure):
    labelled = list(iter_training_log(20_000, seed=3, ranks=16, failure=failure, labelled=True))
    compressed = compress_log(text for text, _ in labelled)
    kept = _kept_error_keys(compressed)
    wanted = [text for text, label in labelled if label in ("error", "traceback")]
    assert wanted
    missing = [t for t in wanted if error_key(strip_prefix(t)[0]) not in kept]
    assert missing == []
    assert 1 - compressed.stats["lines_out"] / compressed.stats["lines_in"] >= 0.95


def test_long_training_log_drops_95_percent():
    compressed = compress_log(iter_training_log(100_000, seed=5, ranks=64, failure="NVLinkError"))
    stats = compressed.stats
    assert 1 - stats["lines_out"] / stats["lines_in"] >= 0.95
    assert any("uncorrectable NVLink error" in k.text for k in compressed.lines)


def test_rank_dedup_keeps_first_line_number_and_counts_ranks():
    lines = ["starting"] * 4
    for rank in [7] + [r for r in range(512) if r != 7]:
        lines.append(f"[rank{rank}]: RuntimeError: CUDA error: an illegal memory access was encountered")
        lines.append(f"{rank}: [E314 10:33:12.655753 ProcessGroupNCCL.cpp:607] [Rank {rank}] Watchdog caught "
                     f"collective operation timeout: WorkNCCL(SeqNum=5, Timeout(ms)=600000) ran for 600{rank:03d} ms")  # fmt: skip
    compressed = compress_log(lines)
    errors = [k for k in compressed.lines if k.kind == KIND_ERROR]
    assert len(errors) == 2
    first = errors[0]
    assert first.line == 5 and first.count == 512
    assert first.ranks[0] == "7" and len(first.ranks) == 16  # listed ranks are bounded
    assert errors[1].line == 6 and errors[1].count == 512


def test_traceback_lines_are_kept_even_when_they_look_routine():
    lines = [
        "Traceback (most recent call last):",
        '  File "train.py", line 10, in <module>',
        "    lr: 0.1",  # indented code that a config-dump filter would drop
        "KeyError: 'lr'",
        "  lr: 0.1",
    ]
    compressed = compress_log(lines)
    assert [k.line for k in compressed.lines if k.kind in (KIND_ERROR, KIND_TRACEBACK)] == [1, 2, 3, 4, 5]


def test_gzip_and_cli(tmp_path):
    log = tmp_path / "job.log.gz"
    written = 0
    with gzip.open(log, "wt") as fh:
        for text in iter_training_log(5_000, seed=1, ranks=8, failure="OutOfMemoryError"):
            fh.write(text + "\n")
            written += 1
    out = tmp_path / "out" / "job.compressed.txt"
    stats = compress_cli(log, out)
    assert set(stats) == {"lines_in", "lines_out", "kept_errors", "seconds"}
    assert stats["lines_in"] == written  # tqdm's "\r" inside a line does not split it
    assert stats["kept_errors"] > 0
    assert "CUDA out of memory" in out.read_text()


@pytest.mark.skipif(not BGL.exists(), reason="shared reference data not available")
def test_bgl_alerts_all_kept_with_90_percent_dropped():
    compressed = compress_log(BGL / "BGL_2k.log")
    kept = _kept_error_keys(compressed)
    with (BGL / "BGL_2k.log_structured.csv").open(newline="") as fh:
        labels = [row["Label"] for row in csv.DictReader(fh)]
    lines = (BGL / "BGL_2k.log").read_text().splitlines()
    assert len(labels) == len(lines) == 2000
    alerts = [
        line for line, label in zip(lines, labels, strict=True) if label != "-"
    ]  # the label is the oracle only
    assert len(alerts) == 143
    assert [a for a in alerts if error_key(strip_prefix(a)[0]) not in kept] == []
    assert 1 - compressed.stats["lines_out"] / compressed.stats["lines_in"] >= 0.90


def test_memory_stays_bounded_on_a_million_lines():
    script = textwrap.dedent(
        """
        import resource, sys
        from acme.diagnosis.compress import compress_log

        def stream(n):
            for i in range(n):
                r = i % 100
                if r == 0:  # a distinct error every 100 lines: exercises the bounded dedup and kept lists
                    word = "".join(chr(97 + (i // 26 ** k) % 26) for k in range(5))
                    yield f"[rank{i % 512}]: RuntimeError: failure {word} in step"
                elif r < 70:
                    yield f" iteration {i:>8}/  500000 | consumed samples: {i * 1024:>12} | lm loss: 2.{i % 997:03d}E+00 |"
                elif r < 90:
                    yield f"[rank{i % 512}]: Epoch 0: {i % 100:3d}%|####      | {i % 500}/500 [00:12<01:40,  4.81it/s]"
                else:
                    yield f"node-{i % 64}:123:456 [{i % 8}] NCCL INFO Channel {i % 24:02d}/24 : 0 1 2 3"

        n = int(sys.argv[1])
        c = compress_log(stream(n), max_keys=500, max_kept=200, max_templates=50)
        assert c.stats["lines_in"] == n
        print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
        """
    )
    root = Path(__file__).resolve().parents[3]

    def peak_kib(n: int) -> int:
        done = subprocess.run(
            [sys.executable, "-c", script, str(n)],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONPATH": str(root / "plugins"), "PATH": "/usr/bin:/bin"},
        )
        return int(done.stdout.strip().splitlines()[-1])

    small, large = peak_kib(100_000), peak_kib(1_000_000)
    assert large - small < 16 * 1024, (small, large)  # 10x the lines, < 16 MiB more peak RSS


def test_filter_rules_validation_names_the_rule():
    with pytest.raises(ConfigError, match="'broken'"):
        parse_filter_rules({"rules": [{"id": "broken", "regex": "(", "description": "x", "version": 1}]})
    with pytest.raises(ConfigError, match="'no_version'"):
        parse_filter_rules({"rules": [{"id": "no_version", "regex": "x", "description": "x"}]})
    with pytest.raises(ConfigError, match="defined twice"):
        rule = {"id": "a", "regex": "x", "description": "x", "version": 1}
        parse_filter_rules({"rules": [rule, rule]})
    assert load_filter_rules()  # the bundled file is valid


def test_synthetic_generator_is_deterministic_and_supports_every_failure():
    first = list(iter_training_log(2_000, seed=9, failure="ECCError"))
    assert first == list(iter_training_log(2_000, seed=9, failure="ECCError"))
    for failure in SUPPORTED_FAILURES:
        assert any(label != "routine" for _, label in iter_training_log(300, failure=failure, labelled=True))


def _bar(steps: int) -> str:
    return "".join(
        f"Epoch 0: {i:3d}%|{'#' * (i // 5):<20}| {i * 320}/32000 [00:{i:02d}<01:00, loss=2.6]\r"
        for i in range(steps)
    )


def test_an_error_after_a_long_carriage_return_progress_bar_is_kept_whole_and_folded():
    error = "RuntimeError: CUDA error: an illegal memory access was encountered"
    lines = ["[rank0]: starting", _bar(100) + f"[rank0]: {error}", f"[rank1]: {error}", _bar(50)]
    assert len(lines[1]) > 7000  # far beyond max_line_chars: the error must not be cut off
    kept = [k for k in compress_log(lines).lines if k.kind == KIND_ERROR]
    assert [(k.line, k.count, k.ranks) for k in kept] == [(2, 2, ["0", "1"])]
    # Kept whole, after the bar's state when it came (the older states dropped).
    assert kept[0].text.startswith("Epoch 0:  99%") and kept[0].text.endswith(f"\r[rank0]: {error}")
    assert kept[0].text.count("\r") == 1
    from tests.diagnosis_support import diagnose_log

    assert diagnose_log(lines).reason == "CUDAError"


def test_a_progress_bar_line_without_error_is_one_line_not_many():
    compressed = compress_log(["header", _bar(40), "footer"])
    assert compressed.stats["lines_in"] == 3 and compressed.stats["kept_errors"] == 0
    assert sorted(k.line for k in compressed.lines) == sorted({k.line for k in compressed.lines})


def test_a_nan_loss_that_training_recovered_from_is_not_blamed():
    from acme.diagnosis.compress import KIND_RECOVERED
    from tests.diagnosis_support import diagnose_log

    spike = " iteration      30/ 1000 | lm loss: nan | grad norm: nan | loss scale: 16384.0 |"
    after = [f" iteration {i:7d}/ 1000 | lm loss: {3.0 - i / 100:.6E} | grad norm: 1.2 |" for i in (40, 50)]
    compressed = compress_log([spike, *after])
    assert [k.kind for k in compressed.lines if k.line == 1] == [KIND_RECOVERED]
    assert diagnose_log([spike, *after]).reason == "Unknown"
    assert diagnose_log([spike, *after], job={"state": "TIMEOUT"}).reason == "SchedulerTimeLimit"
    crash = "[rank2]: RuntimeError: CUDA error: an illegal memory access was encountered"
    assert diagnose_log([spike, *after, crash]).reason == "CUDAError"
    # A NaN the training did not get past is the failure.
    assert diagnose_log([*after, spike]).reason == "LossSpike"


def test_an_exception_in_a_thread_header_is_an_error_line():
    from acme.diagnosis.compress import is_error_line

    # Python's header for an exception raised in a thread comes before its traceback (issue 31's first
    # contact dropped it: a decisive line of the tensorboardX writer's failure).
    assert is_error_line("Exception in thread Thread-1:")
    assert not is_error_line("Exception handling in threads is described in the docs")
    lines = ["epoch 140/140 done", "Exception in thread Thread-1:", "Traceback (most recent call last):",
             '  File "/usr/lib/python3.10/threading.py", line 1016, in _bootstrap_inner', "OSError: handle is closed"]  # fmt: skip
    kept = compress_log(lines)
    assert (2, KIND_ERROR) in [(k.line, k.kind) for k in kept.lines]


def test_an_lsf_termination_reason_is_an_error_line():
    from acme.diagnosis.compress import is_error_line

    # LSF's job summary ends with the termination reason; "killed" in lower case is no strong signal alone.
    assert is_error_line("TERM_OWNER: job killed by owner.")
    assert is_error_line("TERM_CWD_NOTEXIST: Current working directory is not accessible")
    assert not is_error_line("Successfully completed.")
    kept = compress_log(["Started at Thu May 23 08:19:57 2024", "TERM_OWNER: job killed by owner.", "Done"])
    assert [(k.line, k.kind) for k in kept.lines if k.kind == KIND_ERROR] == [(2, KIND_ERROR)]
