"""The LLM failure agent on every labelled line of the corpus, beside rules and retrieval: accuracy, latency.

Corpus: ``tests/fixtures/diagnosis/corpus/lines.yaml`` (verbatim error lines from public issue trackers,
labelled with the paper's failure reasons; ``alternatives`` count as right, as in
``bench_diagnosis_accuracy.py``). Each line is scored on its own, leave-one-source-out:

- **rules**: the bundled rules minus those written from the line's source (``diagnose_lines``);
- **rules + retrieval**: where the rules say Unknown, the vote of the nearest labelled lines of other sources
  (lexical embedding, no model load), as in the pipeline;
- **agent**: ``FailureAgent`` against llama.cpp's OpenAI-compatible server with SmolLM2-135M-Instruct on
  127.0.0.1 (started and stopped here), asked on every line (not only where the rules are unsure, so its
  own accuracy is measured); an answer rejected twice counts as "unavailable" (and as wrong);
- **pipeline with agent**: what the diagnosis would decide -- the rule when one matched (the agent never
  overrides it), else the agent's valid answer, else retrieval.

Accuracy is the share of lines whose reason is accepted (95% Wilson interval); latency is the agent's
wall-clock seconds per line (median, p90, max) on this shared 2-core machine. Lines are scored in a fixed
shuffled order, so a ``--limit`` (or a run stopped early) is a spread sample. Results:
``benchmarks/results/agent.json``; each scored line is also appended to ``results/agent_rows.jsonl`` as it
goes.

    .venv/bin/python benchmarks/bench_agent.py [--limit N]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "plugins"))
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "benchmarks" / "results" / "agent.json"
PARTIAL = ROOT / "benchmarks" / "results" / "agent_rows.jsonl"


def _accuracy(rows: list[dict], key: str) -> dict:
    from acme.evaluation.evaluation_run import wilson_interval

    correct = sum(1 for r in rows if r[key] in r["accepted"])
    low, high = wilson_interval(correct, len(rows))
    return {
        "correct": correct,
        "of": len(rows),
        "accuracy": round(correct / len(rows), 4) if rows else 0.0,
        "interval_95": [round(low, 4), round(high, 4)],
    }


def _agent_reason(agent, case, job: dict) -> tuple[str, str | None, float]:
    from acme.diagnosis.compress import compress_log
    from acme.diagnosis.llm_agent import AgentUnavailable

    started = time.perf_counter()
    try:
        said, why = agent.diagnose(compress_log([case.text]).to_text(), [], job).reason, None
    except AgentUnavailable as exc:
        said, why = "unavailable", str(exc)[:200]
    return said, why, time.perf_counter() - started


def summarize(rows: list[dict], how: str, wall_s: float | None) -> dict:
    """Accuracy (with Wilson intervals) of each method and the agent's latency over the scored ``rows``."""
    latencies = sorted(r["agent_s"] for r in rows)
    return {
        "corpus": f"tests/fixtures/diagnosis/corpus/lines.yaml: {len(rows)} labelled lines (fixed shuffled order)",
        "model": f"SmolLM2-135M-Instruct (Q4_1 GGUF) via llama.cpp server, {how}",
        "machine": f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end",
        "wall_s": wall_s,
        "rules": _accuracy(rows, "rules"),
        "rules_plus_retrieval_lexical": _accuracy(rows, "retrieval"),
        "agent": _accuracy(rows, "agent"),
        "agent_on_lines_rules_left_unknown": _accuracy([r for r in rows if r["rules"] == "Unknown"], "agent"),
        "pipeline_with_agent": _accuracy(rows, "pipeline_with_agent"),
        "agent_unavailable": sum(1 for r in rows if r["agent"] == "unavailable"),
        "agent_answers": dict(Counter(r["agent"] for r in rows).most_common()),
        "agent_latency_s": {
            "median": round(statistics.median(latencies), 2),
            "p90": round(latencies[int(0.9 * (len(latencies) - 1))], 2),
            "max": latencies[-1],
        },
        "rows": rows,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--limit", type=int, default=0, help="N lines of the shuffled order only (0: all)")
    parser.add_argument("--max-answer-tokens", type=int, default=160)
    parser.add_argument(
        "--from-rows", action="store_true", help="summarize results/agent_rows.jsonl of a run stopped early"
    )
    args = parser.parse_args()
    if args.from_rows:
        rows = [json.loads(line) for line in PARTIAL.read_text().splitlines() if line]
        document = summarize(rows, "a run stopped early (its rows so far)", None)
        RESULTS.write_text(json.dumps(document, indent=1) + "\n")
        print(json.dumps({k: v for k, v in document.items() if k != "rows"}, indent=1))
        return 0
    # A TERM unwinds the with-block below, so the model server is stopped too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    os.environ.setdefault("ACME_DIAGNOSIS_EMBEDDING", "lexical")

    from benchmarks.bench_diagnosis_accuracy import CaseIndex, load_corpus, rules_without

    from acme.diagnosis.llm_agent import FailureAgent
    from acme.diagnosis.llm_endpoint import LLMEndpoint, _working_mode
    from acme.diagnosis.local_llm_server import local_llm_server
    from acme.diagnosis.retrieval import LexicalEmbedder, error_signature
    from acme.diagnosis.rules import UNKNOWN, diagnose_lines, load_rules

    rules = load_rules()
    lines, _ = load_corpus()
    # A fixed shuffle: any prefix of the run (a --limit, or a run stopped early) is a spread sample of the
    # corpus, not its first sources. Each row keeps the line's corpus index.
    order = list(range(len(lines)))
    random.Random(0).shuffle(order)
    if args.limit:
        order = order[: args.limit]
    index = CaseIndex(load_corpus()[0], rules, LexicalEmbedder())
    rows = []
    PARTIAL.unlink(missing_ok=True)
    started_all = time.perf_counter()
    with local_llm_server() as server:
        endpoint = LLMEndpoint(base_url=server.base_url, model=server.model, timeout_s=600, max_retries=1)
        agent = FailureAgent(endpoint, max_log_lines=40, max_answer_tokens=args.max_answer_tokens)
        for number in order:
            case = lines[number]
            here = rules_without(case.source, rules)
            rule = diagnose_lines([(1, case.text)], here).reason
            retrieved = rule
            if rule == UNKNOWN:
                retrieved = index.vote(error_signature([(1, case.text)], here), case.source) or UNKNOWN
            said, why, seconds = _agent_reason(agent, case, {"job_id": f"corpus-{number}"})
            valid = said != "unavailable"
            pipeline = rule if rule != UNKNOWN else (said if valid else retrieved)
            rows.append(
                {"n": number, "source": case.source, "label": case.reason,
                 "accepted": [case.reason, *case.alternatives], "rules": rule, "retrieval": retrieved,
                 "agent": said, "agent_rejection": why, "pipeline_with_agent": pipeline,
                 "agent_s": round(seconds, 2)}
            )  # fmt: skip
            print(json.dumps(rows[-1]), flush=True)
            with open(PARTIAL, "a") as partial:  # the rows so far, for a run stopped early
                partial.write(json.dumps(rows[-1]) + "\n")
        mode = _working_mode.get((endpoint.base_url, endpoint.model))
    document = summarize(rows, f"structured output {mode}", round(time.perf_counter() - started_all, 1))
    RESULTS.write_text(json.dumps(document, indent=1) + "\n")
    print(json.dumps({k: v for k, v in document.items() if k != "rows"}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
