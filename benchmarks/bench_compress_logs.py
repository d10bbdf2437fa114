"""Log compression: drop ratio, kept errors and throughput (acme.diagnosis.compress).

1. **Synthetic training log.** ``--lines`` (default 1,000,000) lines of a 64-rank Megatron/DeepSpeed-style
   log from ``acme.diagnosis.synth_log`` ending in an ECC-error cascade, written once to a temporary file
   and compressed from the file (one core): drop ratio, whether every error/traceback line of the oracle
   is kept, lines per second (median of ``--runs``).
2. **Several failures.** 100,000-line logs for a few failure reasons: drop ratio and kept errors.
3. **A real excerpt.** A real NCCL/IB error excerpt from tests/fixtures/diagnosis/labelled_errors.yaml
   spliced into a synthetic log: drop ratio and diagnosis.
4. **BGL** (loghub, 2,000 lines): every alert line (Label != '-', read here only as the oracle) kept,
   drop ratio.
5. **Real logs** (issue 27): the 68 real job logs of tests/fixtures/diagnosis/corpus/ (logs/ and baselines/,
   93,437 lines) concatenated in name order, once and cycled to ``--real-lines`` (default 400,000), and one
   real long log of a single job, once (``benchmarks/data/``, 86,809 lines: an MLPerf v0.7 Mask R-CNN run on
   16 DGX-2H nodes; provenance in benchmarks/data/SOURCES.md), each compressed from a plain file; with
   ``--before REF`` the compressor and filter rules of git revision REF run on the same files, alternated
   with this one in the same process (CPU seconds, median of ``--runs``), and their outputs are compared.

Results go to benchmarks/results/compress_logs.json (``--real-only``: results/compress_real_logs.json).
Usage: python benchmarks/bench_compress_logs.py [--lines 1000000] [--runs 3] [--before main] [--real-only]
"""

from __future__ import annotations

import argparse
import csv
import gzip
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "plugins"))
RESULTS = ROOT / "benchmarks" / "results" / "compress_logs.json"
BGL = ROOT.parent / "shared" / "reference" / "loghub_2k" / "BGL"
LABELLED = ROOT / "tests" / "fixtures" / "diagnosis" / "labelled_errors.yaml"
CORPUS = ROOT / "tests" / "fixtures" / "diagnosis" / "corpus"
REAL_RESULTS = ROOT / "benchmarks" / "results" / "compress_real_logs.json"
LONG_LOG = ROOT / "benchmarks" / "data" / "mlperf-v0.7-nvidia-maskrcnn-dgx2h-n16-result_3.log.gz"
FILTER_RULES = "include/diagnosis/filter_rules.yaml"


def _all_errors_kept(compressed, wanted: list[str]) -> tuple[bool, int]:
    from acme.diagnosis.compress import error_key, strip_prefix

    kept = {error_key(strip_prefix(k.text)[0]) for k in compressed.lines if k.kind in ("error", "traceback")}
    missing = [t for t in wanted if error_key(strip_prefix(t)[0]) not in kept]
    return not missing, len(missing)


def bench_training_log(lines: int, runs: int) -> dict:
    from acme.diagnosis.compress import compress_log
    from acme.diagnosis.synth_log import iter_training_log

    wanted = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "train.log"
        with path.open("w", encoding="utf-8") as fh:
            for text, label in iter_training_log(lines, seed=11, ranks=64, failure="ECCError", labelled=True):
                fh.write(text + "\n")
                if label != "routine":
                    wanted.append(text)
        size_mb = path.stat().st_size / 1e6
        timings, compressed = [], None
        for _ in range(runs):
            started = time.perf_counter()
            compressed = compress_log(path)
            timings.append(time.perf_counter() - started)
    stats = compressed.stats
    all_kept, missing = _all_errors_kept(compressed, wanted)
    seconds = statistics.median(timings)
    return {
        "lines_in": stats["lines_in"],
        "size_mb": round(size_mb, 1),
        "lines_out": stats["lines_out"],
        "drop_ratio": round(1 - stats["lines_out"] / stats["lines_in"], 5),
        "error_lines_in": len(wanted),
        "all_errors_kept": all_kept,
        "missing_errors": missing,
        "seconds_median": round(seconds, 3),
        "seconds_runs": [round(t, 3) for t in timings],
        "lines_per_second": round(stats["lines_in"] / seconds),
        "templates": stats["templates"],
    }


def bench_failures() -> list[dict]:
    from acme.diagnosis.compress import compress_log
    from acme.diagnosis.rules import diagnose_lines
    from acme.diagnosis.synth_log import iter_training_log

    rows = []
    for failure in (
        "NVLinkError",
        "CUDAError",
        "NCCLTimeoutError",
        "OutOfMemoryError",
        "KeyError",
        "LossSpike",
    ):
        labelled = list(iter_training_log(100_000, seed=3, ranks=64, failure=failure, labelled=True))
        started = time.perf_counter()
        compressed = compress_log(t for t, _ in labelled)
        seconds = time.perf_counter() - started
        wanted = [t for t, label in labelled if label != "routine"]
        all_kept, _ = _all_errors_kept(compressed, wanted)
        diagnosis = diagnose_lines(
            (k.line, k.text) for k in compressed.lines if k.kind in ("error", "traceback")
        )
        rows.append(
            {
                "failure": failure,
                "lines_in": compressed.stats["lines_in"],
                "lines_out": compressed.stats["lines_out"],
                "drop_ratio": round(1 - compressed.stats["lines_out"] / compressed.stats["lines_in"], 5),
                "all_errors_kept": all_kept,
                "lines_per_second": round(compressed.stats["lines_in"] / seconds),
                "diagnosed": diagnosis.reason,
            }
        )
    return rows


def bench_real_excerpt() -> dict:
    import yaml

    from acme.diagnosis.rules import diagnose_lines
    from acme.diagnosis.synth_log import iter_training_log

    items = {item["id"]: item for item in yaml.safe_load(LABELLED.read_text())}
    item = items["nccl-1405-ib-completion"]
    lines = list(iter_training_log(100_000, seed=5, ranks=64, excerpt=item["text"].splitlines()))
    from acme.diagnosis.compress import compress_log

    compressed = compress_log(lines)
    return {
        "excerpt": item["id"],
        "source": item["source"],
        "lines_in": compressed.stats["lines_in"],
        "lines_out": compressed.stats["lines_out"],
        "drop_ratio": round(1 - compressed.stats["lines_out"] / compressed.stats["lines_in"], 5),
        "diagnosed": diagnose_lines(
            [(k.line, k.text) for k in compressed.lines if k.kind in ("error", "traceback")]
        ).reason,
        "expected": item["reason"],
    }


def bench_bgl() -> dict | None:
    from acme.diagnosis.compress import compress_log, error_key, strip_prefix

    if not BGL.exists():
        return None
    compressed = compress_log(BGL / "BGL_2k.log")
    with (BGL / "BGL_2k.log_structured.csv").open(newline="") as fh:
        labels = [row["Label"] for row in csv.DictReader(fh)]
    lines = (BGL / "BGL_2k.log").read_text().splitlines()
    kept = {error_key(strip_prefix(k.text)[0]) for k in compressed.lines if k.kind == "error"}
    alerts = [line for line, label in zip(lines, labels, strict=True) if label != "-"]
    missing = [a for a in alerts if error_key(strip_prefix(a)[0]) not in kept]
    kinds: dict[str, int] = {}
    for k in compressed.lines:
        kinds[k.kind] = kinds.get(k.kind, 0) + 1
    return {
        "lines_in": compressed.stats["lines_in"],
        "lines_out": compressed.stats["lines_out"],
        "drop_ratio": round(1 - compressed.stats["lines_out"] / compressed.stats["lines_in"], 4),
        "alerts": len(alerts),
        "alerts_missing": len(missing),
        "kept_by_kind": kinds,
    }


def real_corpus_lines() -> list[str]:
    """The lines of the corpus's real job logs (failed runs and good baselines), in file-name order."""
    lines: list[str] = []
    for folder in ("logs", "baselines"):
        for path in sorted((CORPUS / folder).iterdir()):
            data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
            lines.extend(data.decode("utf-8", errors="replace").split("\n"))
    return lines


def long_log_lines() -> list[str]:
    """The lines of the bundled real long log of one job (see benchmarks/data/SOURCES.md)."""
    text = gzip.decompress(LONG_LOG.read_bytes()).decode("utf-8", errors="replace")
    return text.removesuffix("\n").split("\n")


def _git_show(revision: str, path: str) -> str:
    return subprocess.run(
        ["git", "show", f"{revision}:{path}"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout


def _compressor_at(revision: str):
    """The compress module of git ``revision`` and its filter rules, loaded beside the working tree's (the
    module imports only acme)."""
    import yaml

    source = _git_show(revision, "plugins/acme/diagnosis/compress.py")
    folder = Path(tempfile.mkdtemp(prefix="compress-before-"))
    (folder / "compress_before.py").write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("compress_before", folder / "compress_before.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["compress_before"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    rules = module.parse_filter_rules(
        yaml.safe_load(_git_show(revision, FILTER_RULES)), f"{revision}:{FILTER_RULES}"
    )
    return module, rules


def _timed(module, path: Path, rules) -> tuple[float, float, dict]:
    started_cpu, started_wall = time.process_time(), time.perf_counter()
    compressed = module.compress_log(path, rules)
    cpu, wall = time.process_time() - started_cpu, time.perf_counter() - started_wall
    output = compressed.to_dict()
    output["stats"].pop("seconds")
    return cpu, wall, output


def _bench_real_file(path: Path, lines_in: int, versions: dict, runs: int) -> dict:
    cpu: dict[str, list[float]] = {name: [] for name in versions}
    wall: dict[str, list[float]] = {name: [] for name in versions}
    outputs: dict[str, dict] = {}
    for _ in range(runs):
        for name, (module, rules) in versions.items():  # alternated, so both see the same load
            seconds, elapsed, outputs[name] = _timed(module, path, rules)
            cpu[name].append(seconds)
            wall[name].append(elapsed)
    row: dict = {"lines_in": lines_in}
    for name in versions:
        median = statistics.median(cpu[name])
        row[name] = {
            "cpu_seconds_median": round(median, 3),
            "cpu_seconds_runs": [round(t, 3) for t in cpu[name]],
            "wall_seconds_runs": [round(t, 3) for t in wall[name]],
            "lines_per_cpu_second": round(lines_in / median),
            "lines_out": outputs[name]["stats"]["lines_out"],
            "kept_errors": outputs[name]["stats"]["kept_errors"],
        }
    if "before" in versions:
        row["speedup"] = round(row["before"]["cpu_seconds_median"] / row["after"]["cpu_seconds_median"], 2)
        row["identical_output"] = outputs["before"] == outputs["after"]
    return row


def _routine_texts(lines: list[str]) -> list[str]:
    """The distinct texts the filter rules see in ``lines`` (prefix stripped, last carriage-return update), less
    blank and error lines: each is matched against the rules once."""
    from acme.diagnosis.compress import is_error_line, strip_prefix

    texts: dict[str, None] = {}
    for line in lines:
        segments = [seg for seg in line.split("\r") if seg.strip()] or [line]
        texts[strip_prefix(segments[-1])[0]] = None
    return [text for text in texts if text.strip() and not is_error_line(text)]


def profile_rules(inputs: dict[str, list[str]], versions: dict, runs: int) -> dict:
    """CPU milliseconds each filter rule takes on the distinct routine texts of each input (median of ``runs``;
    every rule on every text, as for a line that no rule matches), and how many it matches."""
    result: dict = {}
    for name, lines in inputs.items():
        texts = _routine_texts(lines)
        result[name] = {"distinct_routine_texts": len(texts)}
        for version, (_module, rules) in versions.items():
            per_rule = {}
            for rule in rules:
                search = getattr(rule, "search", None) or rule.pattern.search
                timings = []
                for _ in range(runs):
                    started = time.process_time()
                    matched = sum(1 for text in texts if search(text))
                    timings.append(time.process_time() - started)
                per_rule[rule.id] = {
                    "cpu_ms": round(statistics.median(timings) * 1000, 1),
                    "matches": matched,
                }
            per_rule["all"] = {"cpu_ms": round(sum(r["cpu_ms"] for r in per_rule.values()), 1)}
            result[name][version] = per_rule
    return result


def bench_real_logs(total_lines: int, runs: int, before: str | None) -> dict:
    """The real corpus logs once and cycled to ``total_lines`` and the long real log once, this compressor and
    its filter rules beside ``before``'s."""
    from acme.diagnosis import compress

    versions = {"after": (compress, compress.load_filter_rules())}
    if before is not None:
        versions = {"before": _compressor_at(before), **versions}
    once = real_corpus_lines()
    cycled = (once * (total_lines // len(once) + 1))[:total_lines]
    result: dict = {"before": before, "load_average_at_start": os.getloadavg()}
    with tempfile.TemporaryDirectory() as tmp:
        inputs = (("corpus_once", once), ("corpus_cycled", cycled), ("long_log_once", long_log_lines()))
        for name, lines in inputs:
            path = Path(tmp) / f"{name}.log"
            path.write_text("\n".join(lines) + "\n", encoding="utf-8")
            result[name] = _bench_real_file(path, len(lines), versions, runs)
    result["rule_profile"] = profile_rules(
        {"corpus_once": once, "long_log_once": long_log_lines()}, versions, runs
    )
    result["load_average_at_end"] = os.getloadavg()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--real-lines", type=int, default=400_000)
    parser.add_argument(
        "--before", help="a git revision whose compressor runs beside this one on the real logs"
    )
    parser.add_argument("--real-only", action="store_true", help="only the real-log comparison (section 5)")
    args = parser.parse_args()
    if args.real_only:
        real = {
            "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "python": platform.python_version(),
        }
        real.update(bench_real_logs(args.real_lines, args.runs, args.before))
        REAL_RESULTS.parent.mkdir(parents=True, exist_ok=True)
        REAL_RESULTS.write_text(json.dumps(real, indent=2) + "\n")
        print(json.dumps(real, indent=2))
        return
    import drain3

    results = {
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "drain3": getattr(drain3, "__version__", "0.9.11"),
        "training_log": bench_training_log(args.lines, args.runs),
        "failures": bench_failures(),
        "real_excerpt": bench_real_excerpt(),
        "bgl": bench_bgl(),
        "real_logs": bench_real_logs(args.real_lines, args.runs, args.before),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
