# acme-pipeline: `make demo` runs the nightly pipeline on the bundled sample days;
# `make test` runs the whole test suite. Both set everything up on first use.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON_BOOTSTRAP ?= python3
VENV := $(CURDIR)/.venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

# Project-local Airflow on SQLite: nothing outside the repo is touched.
export AIRFLOW_HOME ?= $(CURDIR)/.airflow
export AIRFLOW__CORE__DAGS_FOLDER := $(CURDIR)/dags
export AIRFLOW__CORE__PLUGINS_FOLDER := $(CURDIR)/plugins
export AIRFLOW__CORE__LOAD_EXAMPLES := False
export AIRFLOW__CORE__PARALLELISM ?= 4
export AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION := False
export GX_ANALYTICS_ENABLED := false
export ACME_LAKE_URI ?= $(CURDIR)/lake

DEMO_DAYS := 2023-07-01 2023-07-02 2023-07-03

.PHONY: help setup demo test lint bench clean
.PHONY: stack stack-down up down

help:
	@echo "make demo   - set up (.venv, Airflow on SQLite) and run the nightly DAG on the bundled days"
	@echo "make test   - set up and run the whole test suite (what CI runs)"
	@echo "make lint   - ruff check and format check"
	@echo "make bench  - benchmarks (see benchmarks/README.md)"

setup: $(STAMP) $(AIRFLOW_HOME)/.migrated

$(STAMP): requirements.txt constraints.txt
	test -x $(PY) || $(PYTHON_BOOTSTRAP) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt -c constraints.txt
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

demo: setup
	@echo "Nightly job-trace ingest on the bundled days ($(DEMO_DAYS)); lake: $(ACME_LAKE_URI)"
	@for day in $(DEMO_DAYS); do \
	  log=$(AIRFLOW_HOME)/demo-$$day.log; \
	  $(VENV)/bin/airflow dags test ingest_job_traces $$day -c "{\"day\": \"$$day\"}" > $$log 2>&1; \
	  state=$$(grep -o "DagRun Finished.*" $$log | grep -o "state=[a-z]*" | tail -1 | cut -d= -f2); \
	  echo "  ingest_job_traces $$day: $${state:-did not finish} (log: $$log)"; \
	  if [ "$$state" != success ]; then tail -40 $$log; exit 1; fi; \
	done
	@echo "Nightly monitoring ingest of synthesized seren telemetry (1 node, 8 GPUs) for the same days"
	@for day in $(DEMO_DAYS); do \
	  log=$(AIRFLOW_HOME)/demo-metrics-$$day.log; \
	  exported=$(AIRFLOW_HOME)/demo-telemetry/seren/$$day; \
	  test -d $$exported || $(PY) -m acme synth-metrics --cluster seren --nodes 1 --start $$day \
	    --format acmetrace-csv --seed 1 -o $$exported > /dev/null || exit 1; \
	  $(VENV)/bin/airflow dags test ingest_metrics $$day \
	    -c "{\"day\": \"$$day\", \"cluster\": \"seren\", \"source\": \"acmetrace-csv\", \"input\": \"$$exported\"}" \
	    > $$log 2>&1; \
	  state=$$(grep -o "DagRun Finished.*" $$log | grep -o "state=[a-z]*" | tail -1 | cut -d= -f2); \
	  echo "  ingest_metrics $$day: $${state:-did not finish} (log: $$log)"; \
	  if [ "$$state" != success ]; then tail -40 $$log; exit 1; fi; \
	done
	@$(PY) -m acme lake-summary --lake $(ACME_LAKE_URI)

test: setup
	@$(PY) -m pytest $(PYTEST_ARGS); status=$$?; \
	  if [ $$status -eq 5 ]; then echo "make test: no tests ran" >&2; exit 1; fi; exit $$status

lint: $(STAMP)
	$(VENV)/bin/ruff check dags plugins tests benchmarks
	$(VENV)/bin/ruff format --check dags plugins tests benchmarks

bench: $(STAMP)
	$(PY) benchmarks/bench_ingest_jobs.py
	$(PY) benchmarks/bench_locate_faults.py
	$(PY) benchmarks/bench_plan_eval.py
	$(PY) benchmarks/bench_compress_logs.py
	$(PY) benchmarks/bench_ingest_metrics.py

clean:
	rm -rf $(AIRFLOW_HOME) .airflow-test lake

# The production topology from the venv (stack/stack.py): api-server, scheduler, dag-processor,
# triggerer and a Celery worker on 127.0.0.1, Postgres and Redis of this machine, a loopback S3.
stack: $(STAMP)
	$(PY) stack/stack.py up

stack-down:
	$(PY) stack/stack.py down

# The containers (docker-compose.yaml); needs .env with its secrets (cp .env.example .env).
COMPOSE ?= $(shell docker compose version >/dev/null 2>&1 && echo "docker compose" || echo docker-compose)
up:
	@test -f .env || { echo "make up: copy .env.example to .env and fill in its secrets" >&2; exit 1; }
	$(COMPOSE) up -d

down:
	$(COMPOSE) down
