"""The simulator against hand-computed timelines, and the baselines on tiny suites."""

from __future__ import annotations

import pytest

from acme.errors import ConfigError
from acme.evaluation.planner import PlannerConfig, build_plan
from acme.evaluation.priors import (
    PAPER_HUMANEVAL_LOAD_SHARE,
    PAPER_HUMANEVAL_METRIC_IDLE_SHARE,
    Hardware,
    RuntimePriors,
    TrialOverheads,
    default_overheads,
    parse_model_size,
)
from acme.evaluation.simulator import (
    ClusterSpec,
    Job,
    SliceWork,
    compare,
    lower_bound,
    naive_jobs,
    opencompass_factor,
    opencompass_jobs,
    opencompass_partition,
    plan_eval_cli,
    plan_jobs,
    simulate,
    true_time_factors,
)
from acme.evaluation.suite import EvalDataset, load_default_suite, parse_suite

MODEL = parse_model_size("7B")
FETCH = 14e9 / 3.125e9  # 4.48 s alone on a 25 Gb/s NIC
H2D = 14e9 / 16e9
SHM = 1.4
OVERHEADS = TrialOverheads(setup_s=10.0, preprocess_s_per_sample=0.01, metric_task_setup_s=2.0)


def one_gpu_cluster(nodes: int = 1, gpus: int = 1, cores: int = 64) -> ClusterSpec:
    return ClusterSpec(nodes, MODEL, Hardware(gpus_per_node=gpus, cpu_cores_per_node=cores), OVERHEADS)


def job(
    name: str, load: str, metrics: str, infer: float = 100.0, metric: float = 30.0, n: int = 100, **kw
) -> Job:
    return Job(name, (SliceWork(name, n, n * 0.01, infer, metric),), load, metrics, **kw)


def test_a_single_baseline_trial_takes_its_analytic_time():
    result = simulate(one_gpu_cluster(), [job("x", "remote", "on_gpu")])
    expected = 10.0 + FETCH + H2D + 1.0 + 100.0 + 30.0
    assert result.makespan_s == pytest.approx(expected)
    (record,) = result.records
    assert record.inference_start_s == pytest.approx(10.0 + FETCH + H2D)
    assert record.gpu_release_s == pytest.approx(expected)  # the metric holds the GPU


def test_a_single_decoupled_trial_takes_its_analytic_time():
    result = simulate(one_gpu_cluster(), [job("x", "shm", "cpu_pool")])
    release = max(10.0, FETCH) + SHM + 1.0 + 100.0
    (record,) = result.records
    assert record.gpu_release_s == pytest.approx(release)  # the GPU is free before the metric
    assert result.makespan_s == pytest.approx(release + 2.0 + 30.0)
    assert result.precursor_ready_s == {0: pytest.approx(FETCH)}


def test_concurrent_remote_loads_share_the_node_nic():
    two_on_one_node = simulate(
        one_gpu_cluster(gpus=2), [job("a", "remote", "on_gpu"), job("b", "remote", "on_gpu")]
    )
    assert [r.inference_start_s for r in two_on_one_node.records] == [
        pytest.approx(10.0 + 2 * FETCH + H2D)
    ] * 2
    one_per_node = simulate(
        one_gpu_cluster(nodes=2), [job("a", "remote", "on_gpu"), job("b", "remote", "on_gpu")]
    )
    assert [r.inference_start_s for r in one_per_node.records] == [pytest.approx(10.0 + FETCH + H2D)] * 2


def test_a_fetch_alone_for_part_of_its_transfer_is_faster():
    # The precursor starts at 0 and fetches alone until the remote trial joins after its 10 s set-up;
    # 14 GB at 3.125 GB/s takes 4.48 s, so the precursor is done before the trial starts fetching.
    result = simulate(
        one_gpu_cluster(gpus=2), [job("shm", "shm", "cpu_pool"), job("remote", "remote", "on_gpu")]
    )
    remote = next(r for r in result.records if r.job_id == "remote")
    assert remote.inference_start_s == pytest.approx(10.0 + FETCH + H2D)
    # With a 20 s set-up-free start both fetch together from 0: each gets half the NIC.
    quick = ClusterSpec(1, MODEL, Hardware(gpus_per_node=2), TrialOverheads(0.0, 0.0, 0.0))
    result = simulate(quick, [job("shm", "shm", "cpu_pool", n=1), job("remote", "remote", "on_gpu", n=1)])
    remote = next(r for r in result.records if r.job_id == "remote")
    assert remote.inference_start_s == pytest.approx(2 * FETCH + H2D)
    assert result.precursor_ready_s[0] == pytest.approx(2 * FETCH)


def test_the_calibrated_baseline_reproduces_the_paper_humaneval_trial():
    suite = parse_suite(
        "dataset,n_samples,metric_kind\n" + "".join(f"he{i},164,code_exec\n" for i in range(8))
    )
    overheads = default_overheads()
    cluster = ClusterSpec(1, MODEL, Hardware(), overheads)
    result = simulate(cluster, naive_jobs(suite, MODEL, RuntimePriors(), overheads))
    for record in result.records:
        trial = record.end_s - record.start_s
        load_and_preprocess = record.inference_start_s - record.start_s + 164 * 0.002
        assert load_and_preprocess / trial == pytest.approx(PAPER_HUMANEVAL_LOAD_SHARE)
        metric_idle = record.gpu_release_s - (record.inference_start_s + 164 * (0.6 + 0.002))
        assert metric_idle / trial == pytest.approx(PAPER_HUMANEVAL_METRIC_IDLE_SHARE, rel=1e-3)


def test_metric_tasks_queue_for_cpu_cores():
    cluster = one_gpu_cluster(gpus=2, cores=1)
    result = simulate(cluster, [job("a", "shm", "cpu_pool"), job("b", "shm", "cpu_pool")])
    release = max(10.0, FETCH) + SHM + 1.0 + 100.0
    assert result.makespan_s == pytest.approx(release + 2 * (2.0 + 30.0))


def test_static_dispatch_follows_the_planned_slots_and_dynamic_fills_free_gpus():
    jobs = [
        job("long", "shm", "none", infer=300.0, node=0, slot=0),
        job("short", "shm", "none", infer=50.0, node=0, slot=1),
        job("late", "shm", "none", infer=50.0, node=0, slot=0),
    ]
    static = simulate(one_gpu_cluster(gpus=2), jobs, dispatch="static")
    dynamic = simulate(one_gpu_cluster(gpus=2), jobs, dispatch="dynamic")
    assert {r.job_id: r.slot for r in static.records}["late"] == 0
    assert {r.job_id: r.slot for r in dynamic.records}["late"] == 1
    assert dynamic.makespan_s < static.makespan_s


def test_warm_start_hides_the_set_up_of_the_next_trial():
    jobs = [job("first", "shm", "cpu_pool", warm_next_after_s=50.0), job("second", "shm", "cpu_pool")]
    warm = simulate(one_gpu_cluster(), jobs, warm_start=True)
    first, second = warm.records
    assert second.start_s == pytest.approx(first.inference_start_s + 50.0)  # process started early
    assert second.gpu_acquire_s == pytest.approx(first.gpu_release_s)
    assert second.inference_start_s - second.gpu_acquire_s == pytest.approx(SHM)  # only the shm load
    cold = simulate(one_gpu_cluster(), jobs, warm_start=False)
    assert cold.records[1].inference_start_s - cold.records[1].gpu_acquire_s == pytest.approx(10.0 + SHM)
    assert warm.makespan_s == pytest.approx(cold.makespan_s - 10.0)


def test_opencompass_partition_matches_size_partitioner_by_hand():
    suite = parse_suite(
        "dataset,n_samples,metric_kind,n_choices\n"
        "arc,1172,ppl,4\nhumaneval,164,code_exec,\ngsm8k,1319,match,\nmmlu,14042,ppl,4\n"
    )
    by_name = suite.by_name()
    assert opencompass_factor(by_name["gsm8k"]) == 200  # gen ×20, reasoning ×10
    assert opencompass_factor(by_name["mmlu"]) == 4  # PPL: one pass per option
    assert opencompass_factor(EvalDataset("mathqa", 10, "ppl", n_choices=5)) == 50  # 'math*' matches
    assert opencompass_factor(EvalDataset("mgsm", 10, "match")) == 20
    tasks = [[(d.name, start, stop) for d, start, stop in task] for task in opencompass_partition(suite)]
    # gsm8k: cost 263,800 > 40,000 → step 40000 // 200 = 200 → ceil(1319 / 7) = 189 samples per chunk.
    gsm8k = [(start, stop) for (task,) in tasks[:7] for name, start, stop in [task] if name == "gsm8k"]
    assert gsm8k == [(i * 189, min((i + 1) * 189, 1319)) for i in range(7)]
    # mmlu: cost 56,168 → step 10,000 → ceil(14042 / 2) = 7021.
    assert tasks[7:9] == [[("mmlu", 0, 7021)], [("mmlu", 7021, 14042)]]
    # arc (4,688) and humaneval (3,280) fit one task of at most 40,000.
    assert tasks[9:] == [[("arc", 0, 1172), ("humaneval", 0, 164)]]
    assert len(opencompass_partition(suite, strategy="split")) == 11


def test_baselines_on_one_gpu_are_sums_of_their_trials():
    suite = parse_suite(
        "dataset,n_samples,metric_kind,gpu_s_per_sample,cpu_s_per_sample\na,100,match,1.0,0.1\nb,50,code_exec,2.0,0.5\n"
    )
    priors = RuntimePriors(hardware=Hardware(gpus_per_node=1))
    cluster = ClusterSpec(1, MODEL, priors.hardware, OVERHEADS)
    per_trial_fixed = 10.0 + FETCH + H2D
    naive = simulate(cluster, naive_jobs(suite, MODEL, priors, OVERHEADS))
    assert naive.makespan_s == pytest.approx(2 * per_trial_fixed + 150 * 0.01 + 100 + 10 + 100 + 25)
    # OpenCompass packs both (2,000 + 1,000 cost units) into one task: one load, metrics after inference.
    oc = simulate(cluster, opencompass_jobs(suite, MODEL, priors, OVERHEADS))
    assert len(oc.records) == 1
    assert oc.makespan_s == pytest.approx(per_trial_fixed + 150 * 0.01 + 100 + 100 + 10 + 25)


def test_lower_bound_by_hand_and_below_every_simulated_plan():
    suite = parse_suite(
        "dataset,n_samples,metric_kind,gpu_s_per_sample,cpu_s_per_sample\na,100,match,1.0,0.1\nb,50,code_exec,2.0,0.5\n"
    )
    priors = RuntimePriors(hardware=Hardware(gpus_per_node=2))
    cluster = ClusterSpec(1, MODEL, priors.hardware, OVERHEADS)
    bound = lower_bound(cluster, suite, priors)
    first = max(10.0, FETCH) + SHM
    assert bound.first_inference_s == pytest.approx(first)
    assert bound.gpu_bound_s == pytest.approx(first + (200 + 150 * 0.01) / 2 + 2.0 + 0.1)
    assert bound.chain_bound_s == pytest.approx(first + 0.01 + 2.0 + 2.0 + 0.5)
    cores = priors.hardware.cpu_cores_per_node
    assert bound.cpu_bound_s == pytest.approx(first + (100 * 0.1 + 50 * 0.5 + 2 * 2.0) / cores)
    assert (
        bound.value_s == bound.gpu_bound_s == max(bound.gpu_bound_s, bound.cpu_bound_s, bound.chain_bound_s)
    )
    for nodes in (1, 4):
        for error in (0.0, 0.3):
            result = compare(load_default_suite(), nodes, prior_error=error, seed=1)
            assert result.bound.value_s <= result.ours.makespan_s


def test_true_time_factors_are_seeded_and_bounded():
    suite = load_default_suite()
    assert set(true_time_factors(suite).values()) == {1.0}
    factors = true_time_factors(suite, 0.3, seed=7)
    assert factors == true_time_factors(suite, 0.3, seed=7)
    assert factors != true_time_factors(suite, 0.3, seed=8)
    assert all(0.7 <= f <= 1.3 for f in factors.values())
    with pytest.raises(ConfigError, match="prior_error"):
        true_time_factors(suite, 1.5)


def test_plan_jobs_apply_the_true_time_factors():
    suite = load_default_suite()
    plan = build_plan(suite, nodes=1, config=PlannerConfig(warm_start=False))
    overheads = default_overheads()
    factors = {d.name: 1.3 for d in suite.datasets}
    exact = plan_jobs(plan, overheads)
    slow = plan_jobs(plan, overheads, factors)
    assert sum(s.infer_s for j in slow for s in j.slices) == pytest.approx(
        1.3 * sum(s.infer_s for j in exact for s in j.slices)
    )
    assert all(j.warm_next_after_s is None for j in exact)


def test_plan_eval_cli_returns_exactly_the_promised_keys(tmp_path):
    path = tmp_path / "suite.csv"
    path.write_text("dataset,n_samples,metric_kind\ngsm8k,1319,match\nhumaneval,164,code\nmmlu,?,ppl\n")
    result = plan_eval_cli(path, nodes=1)
    assert list(result) == [
        "trials",
        "makespan_s",
        "naive_makespan_s",
        "opencompass_makespan_s",
        "lower_bound_s",
        "speedup_vs_naive",
        "speedup_vs_opencompass",
        "priors",
        "warnings",
    ]
    assert result["speedup_vs_naive"] == pytest.approx(
        result["naive_makespan_s"] / result["makespan_s"], rel=1e-3
    )
    assert result["lower_bound_s"] <= result["makespan_s"]
    assert any("mmlu: size unknown" in w for w in result["warnings"])
    planned_only = plan_eval_cli(path, nodes=2, simulate=False)
    assert planned_only["naive_makespan_s"] is None and planned_only["speedup_vs_opencompass"] is None
    assert planned_only["makespan_s"] > 0


def test_jobs_and_clusters_are_validated():
    with pytest.raises(ConfigError, match="load"):
        job("x", "tape", "on_gpu")
    with pytest.raises(ConfigError, match="nothing to simulate"):
        simulate(one_gpu_cluster(), [])
    with pytest.raises(ConfigError, match="static dispatch"):
        simulate(one_gpu_cluster(), [job("x", "shm", "none")], dispatch="static")
