"""The LLM failure agent on the labelled error corpus, beside the rules and retrieval: accuracy and latency.

Corpus: ``tests/fixtures/diagnosis/labelled_errors.yaml`` (real error excerpts from public issue trackers,
labelled with the paper's failure reasons). For each excerpt (the first ``--limit``, default all):

- **rules**: the bundled rules on the compressed excerpt (``acme.diagnosis.rules.diagnose_lines``);
- **retrieval**: leave-one-out nearest case among the other excerpts (lexical embedding: no model load),
  its reason when the similarity clears the retrieval threshold, else Unknown;
- **agent**: ``FailureAgent`` against llama.cpp's OpenAI-compatible server with SmolLM2-135M-Instruct on
  127.0.0.1 (started and stopped here), asked on every excerpt (not only where the rules are unsure, so
  its own accuracy is measured); an answer rejected twice counts as "unavailable".

Accuracy is the share of excerpts whose reason matches the label (with its 95% Wilson interval); latency is
the agent's wall-clock seconds per excerpt (median, p90), on this shared 2-core machine.
Results go to benchmarks/results/agent.json.

    .venv/bin/python benchmarks/bench_agent.py [--limit 20]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "plugins"))
RESULTS = ROOT / "benchmarks" / "results" / "agent.json"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--limit", type=int, default=0, help="first N excerpts only (0: all)")
    parser.add_argument("--max-answer-tokens", type=int, default=300)
    args = parser.parse_args()
    os.environ.setdefault("ACME_DIAGNOSIS_EMBEDDING", "lexical")

    import yaml

    from acme.diagnosis.compress import compress_log
    from acme.diagnosis.llm_agent import AgentUnavailable, FailureAgent
    from acme.diagnosis.llm_endpoint import LLMEndpoint, _working_mode
    from acme.diagnosis.local_llm_server import local_llm_server
    from acme.diagnosis.retrieval import LexicalEmbedder
    from acme.diagnosis.rules import diagnose_lines
    from acme.evaluation.evaluation_run import wilson_interval

    corpus = yaml.safe_load((ROOT / "tests" / "fixtures" / "diagnosis" / "labelled_errors.yaml").read_text())
    if args.limit:
        corpus = corpus[: args.limit]
    compressed = [compress_log(item["text"].splitlines()) for item in corpus]
    embedder = LexicalEmbedder()
    vectors = [embedder.embed([c.to_text()])[0] for c in compressed]

    def cosine(a, b) -> float:
        return float(sum(x * y for x, y in zip(a, b, strict=True)))

    rows = []
    with local_llm_server() as server:
        endpoint = LLMEndpoint(base_url=server.base_url, model=server.model, timeout_s=600, max_retries=1)
        agent = FailureAgent(endpoint, max_log_lines=60, max_answer_tokens=args.max_answer_tokens)
        for index, (item, log) in enumerate(zip(corpus, compressed, strict=True)):
            kept = [(k.line, k.text) for k in log.lines if k.kind in ("error", "traceback")]
            rule = diagnose_lines(kept).reason
            others = [j for j in range(len(corpus)) if j != index]
            nearest = max(others, key=lambda j: cosine(vectors[index], vectors[j]))
            similarity = cosine(vectors[index], vectors[nearest])
            retrieved = corpus[nearest]["reason"] if similarity >= embedder.min_similarity else "Unknown"
            started = time.perf_counter()
            try:
                said = agent.diagnose(log.to_text(), [], {"job_id": item["id"]}).reason
            except AgentUnavailable as exc:
                said = f"unavailable ({str(exc)[:80]})"
            seconds = time.perf_counter() - started
            rows.append(
                {"id": item["id"], "label": item["reason"], "rules": rule, "retrieval": retrieved,
                 "agent": said, "agent_s": round(seconds, 2)}
            )  # fmt: skip
            print(json.dumps(rows[-1]), flush=True)
        mode = _working_mode.get((endpoint.base_url, endpoint.model))

    def accuracy(key: str) -> dict:
        correct = sum(1 for r in rows if r[key] == r["label"])
        low, high = wilson_interval(correct, len(rows))
        return {"correct": correct, "of": len(rows), "accuracy": round(correct / len(rows), 3),
                "interval_95": [round(low, 3), round(high, 3)]}  # fmt: skip

    latencies = sorted(r["agent_s"] for r in rows)
    document = {
        "corpus": f"tests/fixtures/diagnosis/labelled_errors.yaml, first {len(rows)} excerpts",
        "model": f"SmolLM2-135M-Instruct (Q4_1 GGUF) via llama.cpp server, structured output {mode}",
        "machine": f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end",
        "rules": accuracy("rules"),
        "retrieval_leave_one_out_lexical": accuracy("retrieval"),
        "agent": accuracy("agent"),
        "agent_unavailable": sum(1 for r in rows if r["agent"].startswith("unavailable")),
        "agent_latency_s": {
            "median": round(statistics.median(latencies), 2),
            "p90": round(latencies[int(0.9 * (len(latencies) - 1))], 2),
            "max": latencies[-1],
        },
        "rows": rows,
    }
    RESULTS.write_text(json.dumps(document, indent=1) + "\n")
    print(json.dumps({k: v for k, v in document.items() if k != "rows"}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
