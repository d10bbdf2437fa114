"""Names vulture cannot see used (`make lint`: vulture plugins dags vulture_whitelist.py).

vulture matches by bare name, so each line below marks one name as used everywhere. Two parts:

1. Used, but not by a call vulture can see (Airflow config, library attributes, record fields
   read through `asdict`/JSON or by callers outside plugins/ and dags/): each line says who uses it.
2. The issue 18 baseline: code that is dead, or that only tests use (to move under tests/),
   grouped by area. Owners remove their lines as they delete or move the code; the block
   must end up empty.

This file is parsed by vulture, never imported.
"""
# ruff: noqa: B018, F821

# --- 1. Used outside vulture's sight ----------------------------------------------------------

# shared (acme_airflow)
OrderedAssetManager  # loaded by Airflow from AIRFLOW__CORE__ASSET_MANAGER_CLASS (Makefile, stack, compose)
CLASS_PATH  # that setting's value, one spelling for the Makefile/compose and tests
CELERY_CONFIG  # loaded by Airflow's Celery worker from AIRFLOW__CELERY__CELERY_CONFIG_OPTIONS (stack)

# Attributes set on third-party objects (their libraries read them)
_.pad_token  # transformers tokenizer (acme/models/hf.py)
_.padding_side  # transformers tokenizer (acme/models/hf.py)
_.writeable  # numpy array flags: freezes the cached CDF tables (jobs/synth.py)
_.HASH_THRESHOLD  # great_expectations pandas engine setting (jobs/validate.py)
_.progress_bars  # great_expectations context setting (jobs/validate.py)

# Dynamic dispatch
_.create_module  # importlib Loader protocol: the import system calls it (jobs/validate.py placeholders)
_.exec_module  # importlib Loader protocol (jobs/validate.py placeholders)
_.fragments  # report section entries (report/sections.py): read by include/report/templates/report.html.j2
__getattr__  # PEP 562 lazy exports of acme.evaluation (evaluation/__init__.py)

# Record fields: part of a result written out (asdict/JSON/Parquet) or read by its callers
_.diagnosed_at  # diagnosis record column, read by report SQL (create_report_macros.sql)
_.calls  # inference usage counter (acme/models/interface.py), read by tests
_.copied  # precursor copy result (evaluation/precursor.py), read by tests
_.stderr_tail  # sandbox result (evaluation/sandbox.py), read by tests
_.missing_cells  # acmetrace_csv parse result, read by tests and properties
_.help  # exposition parse result: the metrics' HELP text, read by tests
_.requests_made  # Prometheus client counter, read by tests
_.expected_start_s  # evaluation plan slot (planner.py), serialized with the plan
_.expected_gpu_release_s  # evaluation plan slot (planner.py), serialized with the plan
_.expected_end_s  # evaluation plan slot (planner.py), serialized with the plan
_.expected_ready_s  # evaluation plan precursor (planner.py), serialized with the plan
_.model_params  # evaluation plan (planner.py), serialized with the plan (asdict)
_.humaneval_trial_s  # measured prior (priors.py), serialized to evaluation/priors.json
_.load_and_preprocess_s  # measured prior (priors.py), serialized to evaluation/priors.json
_.inference_start_s  # simulator job record (simulator.py), read by tests
_.precursor_ready_s  # simulator job record (simulator.py), read by tests
_.gpu_bound_s  # simulator lower bound part, read by tests
_.cpu_bound_s  # simulator lower bound part, read by tests
_.chain_bound_s  # simulator lower bound part, read by tests
_.first_inference_s  # simulator lower bound part, read by tests

# Used by `make demo`, the stack or the benchmarks (not by plugins/ or dags/)
iter_training_log  # Makefile demo logs, stack/nightly_day.py, benchmarks
write_checkpoint  # Makefile demo checkpoints, benchmarks/bench_crash_to_restart.py
form_of_recovery  # Makefile demo step 4: the approval request of the auto-approved recovery
telemetry_from_synth  # benchmarks/bench_detect_hangs.py (and the detection tests)
synth_run  # benchmarks/bench_trainlog_slowdown.py (and tests/unit/detection/test_trainlog.py)
megatron_log  # benchmarks/bench_trainlog_slowdown.py (and tests/unit/detection/test_trainlog.py)
deepspeed_log  # benchmarks/bench_trainlog_slowdown.py (and tests/unit/detection/test_trainlog.py)
hf_trainer_log  # benchmarks/bench_trainlog_slowdown.py (and tests/unit/detection/test_trainlog.py)
build_lake  # acme.detection.scenario: benchmarks/bench_detect_hangs.py's lake pass (and the detection tests)
step_of  # acme.detection.scenario: benchmarks/bench_detect_hangs.py's lake pass (and the detection tests)
_.undecided_nodes  # benchmarks/bench_locate_faults.py
_.gpu_idle_share  # benchmarks/bench_plan_eval.py
opencompass_two_stage_makespan  # benchmarks/bench_plan_eval.py (the OpenCompass baseline)
_.total_samples  # benchmarks/bench_plan_eval.py
load_default_suite  # lazy export of acme.evaluation, benchmarks/bench_plan_eval.py

# --- 2. issue 18 baseline: dead, to remove ------------------------------------------------------
# "dead": nothing calls it; "tests": only tests call it (move it under tests/ or use it).

# jobs
_.gpu_equiv  # read by name: _peak(pods, "gpu_equiv") (jobs/kubernetes.py)
validate_jobs  # tests: the suite on a canonical frame, as validate_job_table runs it on Arrow (jobs/validate.py)
jobs_from_arrow  # tests and benchmarks: a partition read back as the canonical frame (jobs/schema.py)

# diagnosis

# evaluation

# recovery
find_class  # pickle.Unpickler's hook, overridden to refuse classes (recovery/flight_recorder.py)
failure_counts  # tests and benchmarks: the lemon score's plain baseline (recovery/lemon.py)

# detection

# report

# shared

