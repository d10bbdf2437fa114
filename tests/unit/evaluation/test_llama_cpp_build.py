"""The llama.cpp build the project installs runs a real model on this CPU.

A native build of llama-cpp-python on a CPU with AMX (these machines: Sapphire Rapids) routes the
quantized matrix products through ggml's AMX kernels, which crashed with SIGSEGV at the first
generation (ggml_backend_amx_mul_mat, ggml-org/llama.cpp#20824). The Makefile builds it for
portable AVX2 without AMX; these tests fail on a build that would crash, without crashing pytest
(the generation runs in a child process).
"""

from __future__ import annotations

import subprocess
import sys

from acme.models.bundled import bundled_gguf


def test_the_installed_llama_cpp_is_built_without_the_amx_kernels():
    import llama_cpp

    info = llama_cpp.llama_print_system_info().decode()
    assert "AMX_INT8 = 1" not in info, f"llama.cpp was built with ggml's AMX kernels (run make setup): {info}"


def test_the_bundled_model_generates_in_a_child_process_without_crashing():
    script = (
        "import sys\n"
        "from llama_cpp import Llama\n"
        "m = Llama(model_path=sys.argv[1], n_ctx=256, n_threads=1, n_threads_batch=1, seed=0, verbose=False)\n"
        "out = m.create_completion('The capital of France is', max_tokens=4, temperature=0)\n"
        "print(out['usage']['prompt_tokens'])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(bundled_gguf())], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, (
        f"generation ended with {done.returncode} (negative: a signal): {done.stderr[-2000:]}"
    )
    assert int(done.stdout.strip().splitlines()[-1]) >= 2  # the prompt's tokens went through the model
