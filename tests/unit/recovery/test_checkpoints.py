"""Checkpoint choice after a crash: healthy checkpoints, loss spikes, batches to skip, and refusals."""

from __future__ import annotations

import hashlib
import json
import math

import pytest

from acme.errors import AcmeError, InputError
from acme.lake import Lake
from acme.recovery.checkpoints import (
    BatchRange,
    MetricRow,
    NeedsOperatorError,
    StoredObject,
    check_checkpoint,
    choose_checkpoint,
    choose_checkpoint_in_lake,
    find_checkpoints,
    find_first_spike,
    read_training_metrics,
)

SHARDS = {
    "model/rank_00.pt": b"weights of rank 0",
    "model/rank_01.pt": b"weights of rank 1",
    "optim.pt": b"adam",
}


class Store:
    """An in-memory object store: a listing plus a reader that records what it read."""

    def __init__(self):
        self.objects: dict[str, bytes] = {}
        self.reads: list[str] = []

    def put(self, path: str, data: bytes) -> None:
        self.objects[path] = data

    def listing(self) -> list[StoredObject]:
        return [StoredObject(path, len(data)) for path, data in sorted(self.objects.items())]

    def read(self, path: str) -> bytes:
        self.reads.append(path)
        if path not in self.objects:
            raise FileNotFoundError(path)
        return self.objects[path]


def manifest_for(step: int, shards: dict[str, bytes]) -> bytes:
    entries = [
        {"path": p, "size": len(d), "sha256": hashlib.sha256(d).hexdigest()} for p, d in shards.items()
    ]
    return json.dumps({"step": step, "shards": entries}).encode()


def save(
    store: Store, step: int, prefix: str = "runs/llm-123b/ckpt", shards=None, manifest: bytes | None = None
):
    shards = SHARDS if shards is None else shards
    folder = f"{prefix}/step_{step}"
    for path, data in shards.items():
        store.put(f"{folder}/{path}", data)
    store.put(f"{folder}/manifest.json", manifest if manifest is not None else manifest_for(step, shards))
    return folder


def metrics(losses: dict[int, float], grad_norms: dict[int, float] | None = None) -> list[MetricRow]:
    grad_norms = grad_norms or {}
    return [MetricRow(step, loss, grad_norms.get(step, 1.0)) for step, loss in sorted(losses.items())]


def smooth_losses(last_step: int, every: int = 50) -> dict[int, float]:
    """A healthy curve: loss falling slowly from 4 towards 2."""
    return {step: 2.0 + 2.0 * math.exp(-step / 2000) for step in range(every, last_step + 1, every)}


# --- healthy checkpoints ----------------------------------------------------------------------


def test_newest_healthy_checkpoint_is_chosen_without_metrics():
    store = Store()
    for step in (1000, 2000, 3000):
        save(store, step)
    choice = choose_checkpoint(store.listing(), store.read)
    assert (choice.step, choice.path) == (3000, "runs/llm-123b/ckpt/step_3000")
    assert choice.skipped == () and choice.skip_batches == () and choice.spike is None
    assert "no training metrics" in choice.reason


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        ("no_manifest", "partial: no manifest.json"),
        ("missing_shard", "partial: 1 of 3 shards missing (optim.pt)"),
        ("short_shard", "partial: shard model/rank_00.pt is 3 bytes, the manifest says 17"),
        ("not_json", "corrupt manifest: "),
        ("wrong_step", "corrupt manifest: says step 2000 in the folder of step 3000"),
        ("no_sha", "corrupt manifest: shard optim.pt has no sha256"),
        ("no_shards", "corrupt manifest: no 'shards' list"),
        ("escaping_path", "corrupt manifest: shard 1 has no path inside the folder"),
    ],
)
def test_unhealthy_newest_checkpoint_is_skipped_with_its_reason(damage, reason):
    store = Store()
    save(store, 2000)
    folder = save(store, 3000)
    if damage == "no_manifest":
        del store.objects[f"{folder}/manifest.json"]
    elif damage == "missing_shard":
        del store.objects[f"{folder}/optim.pt"]
    elif damage == "short_shard":
        store.put(f"{folder}/model/rank_00.pt", b"wei")
    elif damage == "not_json":
        store.put(f"{folder}/manifest.json", b'{"step": 3000, "shards": [')
    elif damage == "wrong_step":
        store.put(f"{folder}/manifest.json", manifest_for(2000, SHARDS))
    elif damage == "no_sha":
        document = json.loads(manifest_for(3000, SHARDS))
        del document["shards"][2]["sha256"]
        store.put(f"{folder}/manifest.json", json.dumps(document).encode())
    elif damage == "no_shards":
        store.put(f"{folder}/manifest.json", b'{"step": 3000}')
    elif damage == "escaping_path":
        store.put(f"{folder}/manifest.json", manifest_for(3000, {"../step_2000/optim.pt": b"adam"}))
    choice = choose_checkpoint(store.listing(), store.read)
    assert choice.step == 2000
    assert [(s.step, s.path) for s in choice.skipped] == [(3000, folder)]
    assert choice.skipped[0].reason.startswith(reason), choice.skipped[0].reason
    assert "1 newer checkpoint(s) passed over" in choice.reason


def test_shard_checksums_are_compared_only_when_a_reader_is_given():
    store = Store()
    save(store, 1000)
    folder = save(store, 2000)
    store.put(f"{folder}/optim.pt", b"ADAM")  # same size, different bytes
    assert choose_checkpoint(store.listing(), store.read).step == 2000
    verified = choose_checkpoint(store.listing(), store.read, read_shard=store.read)
    assert verified.step == 1000
    assert verified.skipped[0].reason.startswith("checksum mismatch: shard optim.pt has sha256")


def test_a_checksum_in_the_listing_is_compared_without_reading_shards():
    store = Store()
    save(store, 1000)
    save(store, 2000)
    listing = [
        StoredObject(o.path, o.size, "0" * 64 if o.path.endswith("step_2000/optim.pt") else None)
        for o in store.listing()
    ]
    choice = choose_checkpoint(listing, store.read)
    assert choice.step == 1000
    assert "checksum mismatch" in choice.skipped[0].reason


def test_older_checkpoints_are_not_read_once_one_is_chosen():
    store = Store()
    for step in (1000, 2000, 3000):
        save(store, step)
    choose_checkpoint(store.listing(), store.read, read_shard=store.read)
    assert all("step_3000" in path for path in store.reads)


def test_plain_tuples_are_a_listing_and_objects_outside_step_folders_are_ignored():
    store = Store()
    save(store, 500)
    store.put("runs/llm-123b/ckpt/latest", b"step_500")
    listing = [(o.path, o.size) for o in store.listing()]
    assert choose_checkpoint(listing, store.read).step == 500


def test_a_listing_mixing_two_runs_is_refused():
    store = Store()
    save(store, 500, prefix="runs/a")
    save(store, 500, prefix="runs/b")
    with pytest.raises(InputError, match="step 500 is in two folders"):
        find_checkpoints(store.listing())


@pytest.mark.parametrize(
    "entry", [("a/step_1/x",), ("a/step_1/x", -1), ("", 3), ("a/step_1/x", 1.5), "a/step_1/x"]
)
def test_bad_listing_entries_are_refused(entry):
    with pytest.raises(InputError, match="checkpoint listing"):
        find_checkpoints([entry])


def test_a_manifest_that_cannot_be_read_makes_the_checkpoint_unhealthy():
    store = Store()
    folder = save(store, 100)
    (checkpoint,) = find_checkpoints(store.listing()).values()
    del store.objects[f"{folder}/manifest.json"]  # listed, then gone
    assert check_checkpoint(checkpoint, store.read).startswith("manifest unreadable")


# --- loss spikes --------------------------------------------------------------------------------


def test_no_spike_in_a_falling_loss_curve_with_a_noisy_warmup():
    losses = {1: 11.0, 2: 9.5, 3: 14.0, 4: 8.0, 5: 7.0}  # warm-up: fewer than 5 rows of history
    losses.update(smooth_losses(5000))
    assert find_first_spike(metrics(losses)) is None


def test_loss_above_one_and_a_half_times_the_running_median_is_a_spike():
    losses = smooth_losses(3000)
    losses[2000] = 1.4 * losses[1950]  # a bump, not a spike
    assert find_first_spike(metrics(losses)) is None
    losses[2500] = 1.7 * losses[2450]
    spike = find_first_spike(metrics(losses))
    previous_20 = sorted(losses[s] for s in range(1500, 2500, 50))
    assert spike.step == 2500
    assert spike.running_loss == pytest.approx((previous_20[9] + previous_20[10]) / 2)
    assert "x running median" in spike.why


def test_the_running_median_ignores_one_earlier_outlier():
    losses = {step: 2.0 for step in range(1, 41)}
    losses[20] = 2.9  # below 1.5 x 2.0: not a spike, and the median does not move
    losses[30] = 3.1
    spike = find_first_spike(metrics(losses))
    assert spike.step == 30 and spike.running_loss == 2.0


@pytest.mark.parametrize(
    ("loss", "grad_norm", "why"),
    [
        (math.nan, 1.0, "loss is nan"),
        (math.inf, 1.0, "loss is inf"),
        (2.0, math.nan, "grad norm is nan"),
        (2.0, -math.inf, "grad norm is -inf"),
    ],
)
def test_non_finite_loss_or_grad_norm_is_a_spike_even_in_warmup(loss, grad_norm, why):
    rows = [MetricRow(1, 9.0, 1.0), MetricRow(2, loss, grad_norm), MetricRow(3, 8.0, 1.0)]
    spike = find_first_spike(rows)
    assert (spike.step, spike.why) == (2, why)


def test_the_spike_rule_is_validated():
    with pytest.raises(InputError, match="spike rule"):
        find_first_spike([MetricRow(1, 1.0)], spike_factor=1.0)
    with pytest.raises(InputError, match="spike rule"):
        find_first_spike([MetricRow(1, 1.0)], window=3, min_history=5)


# --- the choice with a spike --------------------------------------------------------------------


def test_last_healthy_checkpoint_before_the_spike_and_the_batches_to_skip():
    store = Store()
    for step in (1000, 1200, 1400, 1600):
        save(store, step)
    losses = smooth_losses(1700)
    losses[1300] = 9.0
    choice = choose_checkpoint(store.listing(), store.read, metrics(losses), margin_steps=100)
    assert choice.step == 1200
    assert choice.spike.step == 1300
    assert [s.step for s in choice.skipped] == [1600, 1400]
    assert all("after the loss spike at step 1300" in s.reason for s in choice.skipped)
    assert choice.skip_batches == (BatchRange(1201, 1400),)
    assert "before the first loss spike at step 1300" in choice.reason
    json.dumps(choice.to_dict(), allow_nan=False)


def test_a_checkpoint_saved_at_the_spike_step_is_after_it():
    store = Store()
    for step in (1000, 1300):
        save(store, step)
    losses = smooth_losses(1400)
    losses[1300] = math.nan
    choice = choose_checkpoint(store.listing(), store.read, metrics(losses), margin_steps=0)
    assert choice.step == 1000
    assert choice.skip_batches == (BatchRange(1001, 1300),)
    assert choice.to_dict()["spike"]["loss"] == "nan"


def test_a_partial_checkpoint_before_the_spike_is_skipped_too():
    store = Store()
    save(store, 1000)
    folder = save(store, 1200)
    del store.objects[f"{folder}/manifest.json"]
    losses = smooth_losses(1500)
    losses[1450] = 20.0
    choice = choose_checkpoint(store.listing(), store.read, metrics(losses))
    assert choice.step == 1000
    assert [s.reason.split(":")[0] for s in choice.skipped] == ["partial"]
    assert choice.skip_batches == (BatchRange(1001, 1550),)


def test_metrics_that_end_before_the_checkpoint_are_flagged_in_the_reason():
    store = Store()
    save(store, 2000)
    choice = choose_checkpoint(store.listing(), store.read, metrics(smooth_losses(1500)))
    assert "metrics end at step 1500" in choice.reason


# --- refusals: a person is needed -------------------------------------------------------------


def test_no_checkpoint_at_all_needs_a_person():
    store = Store()
    store.put("runs/llm-123b/ckpt/README", b"x")
    with pytest.raises(NeedsOperatorError, match=r"no checkpoint folder .* a person must decide"):
        choose_checkpoint(store.listing(), store.read)
    with pytest.raises(AcmeError):
        choose_checkpoint([], store.read)


def test_all_checkpoints_partial_or_corrupt_needs_a_person_with_every_reason():
    store = Store()
    first = save(store, 1000)
    second = save(store, 2000)
    del store.objects[f"{first}/optim.pt"]
    store.put(f"{second}/manifest.json", b"\x00garbage")
    with pytest.raises(NeedsOperatorError) as raised:
        choose_checkpoint(store.listing(), store.read)
    message = str(raised.value)
    assert "none of the 2 checkpoints is healthy" in message
    assert "step 2000: corrupt manifest" in message and "step 1000: partial" in message
    assert [s.step for s in raised.value.skipped] == [2000, 1000]


def test_a_spike_before_every_checkpoint_needs_a_person():
    store = Store()
    save(store, 1000)
    losses = smooth_losses(1200)
    losses[600] = math.inf
    with pytest.raises(NeedsOperatorError, match="before the loss spike at step 600"):
        choose_checkpoint(store.listing(), store.read, metrics(losses))


# --- metric files -------------------------------------------------------------------------------


def test_metrics_from_csv_and_json_lines_agree():
    csv_text = "step,loss,grad_norm\n10,3.5,1.2\n20,nan,\n30,3.1,inf\n"
    jsonl_text = '{"step": 10, "loss": 3.5, "grad_norm": 1.2}\n\n{"step": 20, "loss": NaN}\n{"step": 30, "loss": 3.1, "grad_norm": "inf"}\n'
    from_csv = read_training_metrics(csv_text.encode(), "metrics.csv")
    from_jsonl = read_training_metrics(jsonl_text, "metrics.jsonl")
    for rows in (from_csv, from_jsonl):
        assert [r.step for r in rows] == [10, 20, 30]
        assert math.isnan(rows[1].loss) and rows[1].grad_norm is None and rows[2].grad_norm == math.inf
    assert read_training_metrics(jsonl_text, "metrics.log")[0] == from_jsonl[0]  # sniffed


def test_a_step_logged_again_after_a_resume_takes_the_later_row():
    rows = read_training_metrics("step,loss\n10,3.0\n20,9.0\n10,2.9\n20,2.8\n", "m.csv")
    assert [(r.step, r.loss) for r in rows] == [(10, 2.9), (20, 2.8)]


@pytest.mark.parametrize(
    ("text", "source", "problem"),
    [
        ("", "m.csv", "lacks step and loss"),
        ("step,grad_norm\n1,2\n", "m.csv", "lacks step and loss"),
        ("step,loss\n", "m.csv", "no metric rows"),
        ("step,loss\n1,abc\n", "m.csv", r"m.csv:2: loss 'abc' is not a number"),
        ("step,loss\n1.5,2\n", "m.csv", "is not a step number"),
        ("step,loss\n-1,2\n", "m.csv", "is not a step number"),
        ("step,loss\n1,\n", "m.csv", "m.csv:2: no loss"),
        ('{"step": 1, "loss": 2}\n[1]\n', "m.jsonl", "m.jsonl:2: a JSON line is not an object"),
        ('{"step": 1, "loss": 2\n', "m.jsonl", "m.jsonl:1: not JSON"),
        ('{"loss": 2}\n', "m.jsonl", "no step"),
    ],
)
def test_bad_metric_files_are_refused_with_the_line(text, source, problem):
    with pytest.raises(InputError, match=problem):
        read_training_metrics(text, source)


# --- through the lake ---------------------------------------------------------------------------


def test_choice_through_a_local_lake_returns_urls(tmp_path):
    lake = Lake(str(tmp_path / "lake"))
    for step in (100, 200, 300):
        folder = f"ckpt/run-7/step_{step}"
        for path, data in SHARDS.items():
            lake.write_bytes(f"{folder}/{path}", data)
        lake.write_bytes(f"{folder}/manifest.json", manifest_for(step, SHARDS))
    lake.write_bytes("ckpt/run-7/step_300/optim.pt", b"ADAM")  # corrupt, same size
    losses = {step: 3.0 for step in range(10, 400, 10)}
    losses[250] = 7.5
    lake.write_bytes(
        "metrics/run-7.jsonl",
        "\n".join(json.dumps({"step": s, "loss": v}) for s, v in losses.items()).encode(),
    )

    choice = choose_checkpoint_in_lake(
        lake, "ckpt/run-7", "metrics/run-7.jsonl", verify_checksums=True, margin_steps=20
    )
    assert choice.step == 200
    assert choice.path == lake.url("ckpt/run-7/step_200")
    assert choice.skipped[0].path == lake.url("ckpt/run-7/step_300")
    assert choice.skip_batches == (BatchRange(201, 270),)

    no_spike = choose_checkpoint_in_lake(lake, "ckpt/run-7", verify_checksums=True)
    assert no_spike.step == 200 and no_spike.skipped[0].reason.startswith("checksum mismatch")

    with pytest.raises(NeedsOperatorError, match=r"under .*ckpt/run-8"):
        choose_checkpoint_in_lake(lake, "ckpt/run-8")
    with pytest.raises(InputError, match="no such metrics file"):
        choose_checkpoint_in_lake(lake, "ckpt/run-7", "metrics/missing.csv")
