"""Code execution is contained (timeout, no network, memory, environment); metrics score as documented."""

from __future__ import annotations

import glob
import os
import time

import pytest

from acme.evaluation.sandbox import humaneval_program, network_isolation, run_program
from acme.evaluation.scoring import exact_match, score_slice


def test_a_passing_and_a_failing_program():
    assert run_program("assert 1 + 1 == 2\n").status == "passed"
    failed = run_program("assert 1 + 1 == 3\n")
    assert failed.status == "failed" and "AssertionError" in failed.stderr_tail


def test_an_endless_program_is_killed_with_its_children_at_the_timeout(tmp_path):
    marker = tmp_path / "child-alive"
    program = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    time.sleep(3)\n"
        f"    open({str(marker)!r}, 'w').write('still here')\n"
        "while True:\n"
        "    pass\n"
    )
    started = time.perf_counter()
    result = run_program(program, timeout_s=1)
    assert result.status == "timeout" and not result.passed
    assert time.perf_counter() - started < 5
    time.sleep(3.5)
    assert not marker.exists(), "a forked child outlived the sandbox"


def test_the_program_has_no_network_and_no_inherited_environment(monkeypatch):
    monkeypatch.setenv("ACME_SECRET_FOR_TEST", "s3cr3t")
    connect = run_program("import socket\nsocket.create_connection(('1.1.1.1', 53), timeout=3)\n")
    assert connect.status == "failed" and (
        "unreachable" in connect.stderr_tail or "disabled" in connect.stderr_tail
    )
    assert network_isolation() in ("namespace", "guard")
    leak = run_program("import os, sys\nsys.exit(3 if 'ACME_SECRET_FOR_TEST' in os.environ else 0)\n")
    assert leak.status == "passed"


def test_memory_is_limited_and_the_temp_dir_removed():
    before = set(glob.glob(os.path.join(os.environ.get("TMPDIR", "/tmp"), "acme-sandbox-*")))
    hog = run_program("x = bytearray(3 * 1024 ** 3)\n", memory_mb=512)
    assert hog.status == "failed" and "MemoryError" in hog.stderr_tail
    assert set(glob.glob(os.path.join(os.environ.get("TMPDIR", "/tmp"), "acme-sandbox-*"))) <= before


def test_humaneval_program_runs_check_on_the_entry_point():
    program = humaneval_program(
        "def add(a, b):\n",
        "    return a + b\n",
        "def check(candidate):\n    assert candidate(2, 3) == 5\n",
        "add",
    )
    assert run_program(program).passed
    wrong = humaneval_program(
        "def add(a, b):\n",
        "    return a - b\n",
        "def check(candidate):\n    assert candidate(2, 3) == 5\n",
        "add",
    )
    assert not run_program(wrong).passed


@pytest.mark.parametrize(
    ("answer", "reference", "expected"),
    [
        ("72", "72", True),
        ("$10", "10", True),
        ("He has 35 flowers.", "35", True),
        ("48", "42", False),
        ("1,000", "1000", True),
        ("no number", "5", False),
        ("The Eiffel Tower!", "eiffel tower", True),
        ("Eiffel", "eiffel tower", False),
    ],
)
def test_exact_match(answer, reference, expected):
    assert exact_match(answer, reference) is expected


def test_multiple_choice_accuracy_and_alignment():
    samples = [{"id": "a", "label": 1}, {"id": "b", "label": 0}]
    outputs = [{"id": "a", "choice": 1}, {"id": "b", "choice": 2}]
    scored = score_slice("ppl", samples, outputs, 1.0, "here")
    assert (scored["metric"], scored["correct"], scored["score"]) == ("accuracy", 1, 0.5)
    from acme.errors import InputError

    with pytest.raises(InputError, match="output for 'b' where 'a' was expected"):
        score_slice("ppl", samples, list(reversed(outputs)), 1.0, "here")
