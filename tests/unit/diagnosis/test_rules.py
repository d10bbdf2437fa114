"""Rule-based diagnosis: YAML validation, root cause over symptoms, Unknown, redaction, accuracy on real errors."""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from pathlib import Path

import pytest
import yaml

from acme.diagnosis.compress import compress_cli
from acme.diagnosis.diagnose_cli import diagnose_log_cli
from acme.diagnosis.rules import (
    CATEGORIES,
    EXTRA_REASONS,
    TAXONOMY,
    UNKNOWN,
    attribution_of,
    category_of,
    load_rules,
    parse_rules,
    redact,
)
from acme.diagnosis.synth_log import iter_training_log
from acme.errors import ConfigError
from tests.diagnosis_support import diagnose_log

ROOT = Path(__file__).resolve().parents[3]
TAXONOMY_CSV = ROOT.parent / "shared" / "reference" / "failure_taxonomy.csv"
LABELLED = ROOT / "tests" / "fixtures" / "diagnosis" / "labelled_errors.yaml"


def _rule(**overrides):
    rule = {
        "id": "r1",
        "reason": "ECCError",
        "category": "Infrastructure",
        "attribution": "infrastructure",
        "priority": 100,
        "patterns": ["ECC"],
        "mitigation": "drain",
        "version": 1,
    }
    rule.update(overrides)
    return rule


def test_bundled_rules_cover_every_taxonomy_reason():
    reasons = {r.reason for r in load_rules()}
    assert set(TAXONOMY) <= reasons
    assert {"LossSpike", "GPUDriverFault"} <= reasons


@pytest.mark.skipif(not TAXONOMY_CSV.exists(), reason="shared reference data not available")
def test_taxonomy_constant_matches_the_reference_csv():
    with TAXONOMY_CSV.open(newline="") as fh:
        assert {row["reason"]: row["category"] for row in csv.DictReader(fh)} == TAXONOMY


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"reason": "CosmicRay"}, "not in the failure taxonomy"),
        ({"category": "Script"}, "belongs to category Infrastructure"),
        ({"attribution": "nobody"}, "attribution"),
        ({"patterns": ["("]}, "invalid pattern"),
        ({"priority": "high"}, "priority"),
        ({"mitigation": ""}, "lacks mitigation"),
    ],
)
def test_rule_validation_errors_name_the_rule(overrides, message):
    with pytest.raises(ConfigError, match=message) as caught:
        parse_rules({"rules": [_rule(**overrides)]})
    assert "'r1'" in str(caught.value)


def test_root_cause_beats_symptoms_printed_after_it():
    # An ECC error on one rank, then every rank times out and raises RuntimeErrors.
    diagnosis = diagnose_log(iter_training_log(20_000, seed=4, ranks=32, failure="ECCError"))
    assert (diagnosis.reason, diagnosis.category, diagnosis.attribution) == (
        "ECCError",
        "Infrastructure",
        "infrastructure",
    )
    assert diagnosis.confidence >= 0.9 and diagnosis.rule_id == "ecc-uncorrectable"
    assert any("uncorrectable ECC error" in e["text"] for e in diagnosis.evidence)


def test_root_cause_beats_symptoms_printed_before_it():
    lines = [
        "[rank0]: [E ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, "
        "OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600004 milliseconds before timing out.",
        "[rank1]: RuntimeError: Connection reset by peer",
        "[rank5]: RuntimeError: CUDA error: an illegal memory access was encountered",
        "[rank6]: RuntimeError: CUDA error: uncorrectable NVLink error detected during the execution",
    ]
    assert diagnose_log(lines).reason == "NVLinkError"
    assert diagnose_log(lines[:3]).reason == "CUDAError"
    assert diagnose_log(lines[:2]).reason == "ConnectionError"
    assert diagnose_log(lines[:1]).reason == "NCCLTimeoutError"


def test_equal_priority_earliest_error_wins():
    lines = [
        "[rank3]: KeyError: 'input_ids'",
        "[rank0]: TypeError: forward() got an unexpected keyword argument 'labels'",
    ]
    diagnosis = diagnose_log(lines)
    assert diagnosis.reason == "KeyError" and diagnosis.evidence[0]["line"] == 1


def test_unknown_when_nothing_matches():
    lines = ["training started", " iteration 10/100 | lm loss: 2.0 |", "Killed"]
    diagnosis = diagnose_log(lines)
    assert (diagnosis.reason, diagnosis.category, diagnosis.confidence) == (UNKNOWN, None, 0.0)
    assert diagnosis.evidence == [] and diagnosis.rule_id is None


def test_job_metadata_is_evidence_too():
    diagnosis = diagnose_log(["training started"], job={"state": "NODE_FAIL"})
    assert diagnosis.reason == "NodeFailure" and diagnosis.evidence[0]["line"] == 0


SECRETS = [
    "sk-proj-abcdefghijklmnopqrstuvwx123456",
    "hf_abcdefghijklmnopqrstuvwxyzABCD",
    "AKIAIOSFODNN7EXAMPLE",
    "hunter2hunter2",
    "s3cr3tpass",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
]


def test_redaction_in_evidence_and_compressed_output(tmp_path):
    log = tmp_path / "job.log"
    log.write_text(
        "\n".join(
            [
                f"export OPENAI_API_KEY={SECRETS[0]}",
                f"[rank0]: huggingface_hub.errors.HfHubHTTPError: 401 Unauthorized token={SECRETS[1]}",
                f"[rank0]: botocore.exceptions.ClientError: An error occurred (AccessDenied) key {SECRETS[2]}",
                f"[rank0]: ValueError: bad config --password {SECRETS[3]} for https://bob:{SECRETS[4]}@db.internal/x",
                f"[rank0]: RuntimeError: request failed: Authorization: Bearer {SECRETS[5]}",
            ]
        )
        + "\n"
    )
    result = diagnose_log_cli(log)
    out = tmp_path / "compressed.txt"
    compress_cli(log, out)
    dumped = json.dumps(result) + out.read_text()
    for secret in SECRETS:
        assert secret not in dumped
    assert "[REDACTED]" in dumped
    assert set(result) == {
        "reason",
        "category",
        "attribution",
        "confidence",
        "source",
        "evidence",
        "mitigation",
    }
    assert result["source"] == "rule"


def test_redact_leaves_ordinary_text_alone():
    text = "RuntimeError: CUDA error: an illegal memory access was encountered (token ids 5, lr=3e-4)"
    assert redact(text) == text


def test_accuracy_on_labelled_real_errors():
    items = yaml.safe_load(LABELLED.read_text())
    assert len(items) >= 40
    by_reason: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    by_category: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    failures = []
    for item in items:
        diagnosis = diagnose_log(item["text"].splitlines())
        reason_ok = diagnosis.reason == item["reason"]
        category_ok = diagnosis.category == item["category"]
        by_reason[item["reason"]][0] += reason_ok
        by_reason[item["reason"]][1] += 1
        by_category[str(item["category"])][0] += category_ok
        by_category[str(item["category"])][1] += 1
        if not reason_ok:
            failures.append(
                f"{item['id']}: expected {item['reason']}, got {diagnosis.reason} ({diagnosis.rule_id})"
            )
    reason_acc = sum(v[0] for v in by_reason.values()) / len(items)
    category_acc = sum(v[0] for v in by_category.values()) / len(items)
    print(f"\n{'reason':<22}{'correct':>8}{'total':>7}")
    for reason, (ok, total) in sorted(by_reason.items()):
        print(f"{reason:<22}{ok:>8}{total:>7}")
    print(f"\n{'category':<22}{'correct':>8}{'total':>7}")
    for category, (ok, total) in sorted(by_category.items()):
        print(f"{category:<22}{ok:>8}{total:>7}")
    print(
        f"\nreason accuracy {reason_acc:.3f}, category accuracy {category_acc:.3f} on {len(items)} real errors"
    )
    for line in failures:
        print("MISS", line)
    assert category_acc >= 0.9
    assert reason_acc >= 0.8


# Real lines (tests/fixtures/diagnosis/corpus: NVIDIA/nccl#1405, tatsu-lab/stanford_alpaca#207).
IB_LINE = (
    "kp-ddp-worker-0:3468:3905 [4] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer "
    "10.216.210.236<54862> with status=12 opcode=0 len=0 vendor err 129 (Recv)"
)
NCCL_NAMING_IB = (
    "terminate called after throwing an instance of 'std::runtime_error' what(): NCCL error: remote process "
    "exited or there was a network error, NCCL version 2.14.3 ncclRemoteError: A call failed possibly due to a "
    "network error or a remote process exiting prematurely. Last error: NET/IB : Got completion from peer "
    "11.214.147.122<39138> with error 12, opcode 0, len 0, vendor err 129"
)


def test_an_nccl_error_naming_ib_is_an_nccl_error_unless_the_ib_line_came_first():
    assert diagnose_log([NCCL_NAMING_IB]).reason == "NCCLRemoteError"
    assert diagnose_log([NCCL_NAMING_IB, IB_LINE]).reason == "NCCLRemoteError"  # the IB line came after
    earlier = diagnose_log([IB_LINE, NCCL_NAMING_IB])
    assert earlier.reason == "NetworkError" and earlier.evidence[0]["line"] == 1
    system = (
        "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:825, unhandled system error, NCCL version 2.7.8"
    )
    assert diagnose_log([system]).reason == "NCCLError"
    assert diagnose_log([IB_LINE, system]).reason == "NetworkError"


def test_a_slurm_step_cancelled_after_a_task_failed_is_not_a_users_cancellation():
    # srun tears a step down after one of its tasks died; the task's failure is the cause (NERSC Cori-GPU log).
    segfault = "srun: error: cgpu12: task 0: Segmentation fault"
    step = "0: slurmstepd: error: *** STEP 405737.0 ON cgpu12 CANCELLED AT 2020-01-16T23:05:49 ***"
    job = "slurmstepd: error: *** JOB 1809562 ON r6i5n1 CANCELLED AT 2021-05-23T08:29:53 ***"
    assert diagnose_log([segfault, step]).reason == "SegmentationFault"
    assert diagnose_log([step]).reason == "JobCancelled"  # on its own it still says what it says
    assert diagnose_log([step, job]).reason == "JobCancelled"  # a scancel of the batch job logs both
    killed = "srun: error: nid001: task 3: Killed"  # srun's report of a killed task, logged before the step
    assert diagnose_log([killed, step]).reason == "KilledBySignal"


def test_a_users_keyboard_interrupt_is_a_user_cancellation_not_a_crash():
    interrupt = [
        "Traceback (most recent call last):",
        '  File "/root/train.py", line 212, in <module>',
        "    trainer.train()",
        "KeyboardInterrupt",
    ]
    # What the interrupt causes afterwards (wandb's exit handler failing to reach its server) is not the cause.
    wandb_after = ["wandb: Network error (ConnectionError), entering retry loop.", "KeyboardInterrupt: "]
    diagnosis = diagnose_log(interrupt + wandb_after)
    outcome = (diagnosis.reason, diagnosis.category, diagnosis.attribution)
    assert outcome == ("UserCancelled", "Script", "user")
    assert diagnosis.evidence[0]["text"] == "KeyboardInterrupt"
    assert diagnose_log(["[rank3]: KeyboardInterrupt"]).reason == "UserCancelled"
    assert diagnose_log(["torch.distributed.elastic.multiprocessing.api:Received 2 death signal, shutting down "
                         "workers"]).reason == "UserCancelled"  # fmt: skip
    # A root cause logged before the user gave up still wins; the word inside a message is no interrupt.
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
    assert diagnose_log([oom, *interrupt]).reason == "OutOfMemoryError"
    assert diagnose_log(["except KeyboardInterrupt: handled, saving a checkpoint"]).reason == UNKNOWN


def test_lsf_termination_reasons_are_scheduler_outcomes():
    # The last lines of an LSF job's output file (DTU's cluster, TheDingodile/ML_final) and LSF's documented
    # termination reasons; a root cause logged before the kill still wins.
    summary = ["------------------------------------------------------------", "",
               "TERM_OWNER: job killed by owner.", "Exited with exit code 143."]  # fmt: skip
    assert diagnose_log(summary).reason == "JobCancelled"
    assert diagnose_log(["TERM_RUNLIMIT: job killed after reaching LSF run time limit."]).reason == (
        "SchedulerTimeLimit"
    )
    assert diagnose_log(["TERM_MEMLIMIT: job killed after reaching LSF memory usage limit."]).reason == (
        "OutOfMemoryError"
    )
    assert diagnose_log(["TERM_PREEMPT: job killed after preemption."]).reason == "Preempted"
    oom = "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.62 GiB."
    assert diagnose_log([oom, *summary]).reason == "OutOfMemoryError"
    # bjobs -l / bhist -l report the reason as the job's record does: as job metadata.
    job = {"exit_reason": "TERM_RUNLIMIT: job killed after reaching LSF run time limit"}
    assert diagnose_log(["training step 100"], job=job).reason == "SchedulerTimeLimit"
    # The keyword alone, not a word that contains it.
    assert diagnose_log(["error: LONG_TERM_OWNER_CACHE not set"]).reason == UNKNOWN


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        # srun's report of tasks killed by a signal, one line for a list of tasks (Slurm's format).
        ("srun: error: frontier09310: tasks 8,11,13: Killed", "KilledBySignal"),
        ("srun: error: frontier09310: tasks 9-10,12,14: Killed", "KilledBySignal"),
        # UCX's report of a failed verbs call, with the call's arguments.
        ("0: [1580511823.093560] [cgpu17:53890:1]          ib_md.c:478  UCX  ERROR ibv_reg_mr(address=0x2aab4bc00000, "
         "length=131072, access=0xf) failed: Bad address", "NetworkError"),
        # A DALI reader operator that could not be built: the input pipeline cannot read its data.
        ("Error when constructing operator: readers___TFRecord encountered:", "DatasetLoadingError"),
        # Hydra's override parser (NeMo's launcher): a comma in a value, an override of a key not in the config.
        ("Ambiguous value for argument 'model.data.splits_string=980,10,10'", "ArgumentError"),
        ("Could not override 'trainer.devise'.", "ArgumentError"),
    ],
)  # fmt: skip
def test_tool_message_formats_are_general_signatures(line, reason):
    # Lines of the corpus logs (OLCF Frontier, NERSC Cori-GPU, ALCF Polaris), diagnosed by the general rules
    # alone: no rule written from a corpus source (``sources``) is needed for them.
    general = [rule for rule in load_rules() if not rule.sources]
    assert diagnose_log([line], rules=general).reason == reason


def test_must_precede_names_known_rules():
    with pytest.raises(ConfigError, match="must_precede names unknown rules nope"):
        parse_rules({"rules": [_rule(must_precede=["nope"])]})
    with pytest.raises(ConfigError, match="sources must be a list"):
        parse_rules({"rules": [_rule(sources="x#1")]})


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("NVRM: Xid (PCI:0000:06:00): 79, GPU has fallen off the bus.", "NodeFailure"),
        ("Memory access fault by GPU node-2 (Agent handle: 0x56468ab3bb50) on address 0x7fe55fb03000.", "CUDAError"),
        ("RuntimeError: HIP error: invalid device function", "CUDAError"),
        ("rocBLAS error: [HIP error](invalid resource handle)", "CUDAError"),
        ("torch.OutOfMemoryError: HIP out of memory. Tried to allocate 4.50 GiB.", "OutOfMemoryError"),
        ("Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.", "LossSpike"),
        ("wandb: Network error (ConnectionError), entering retry loop.", "SideServiceError"),
        ("slurmstepd: error: *** JOB 608 ON n1 CANCELLED AT 2022-08-12T02:06:12 DUE TO JOB REQUEUE ***", "Preempted"),
        ("slurmstepd: error: *** JOB 1809562 ON r6i5n1 CANCELLED AT 2021-05-23T08:29:53 ***", "JobCancelled"),
        ("[rank0]:[E321 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: "
         "WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, Timeout(ms)=600000)", "NCCLTimeoutError"),
        # Routine dynamic loss scaling is no failure.
        ("[INFO] [stage3.py:2323:_overflow_clean_up] [deepscale] OVERFLOW! Rank 0 Skipping step. Attempted loss "
         "scale: 16777216.0, reducing to 8388608.0", UNKNOWN),
    ],
)  # fmt: skip
def test_rules_for_what_real_clusters_see(line, reason):
    diagnosis = diagnose_log([line])
    assert diagnosis.reason == reason
    assert diagnosis.category == (None if reason == UNKNOWN else {**TAXONOMY, **EXTRA_REASONS}[reason])


def test_every_reason_has_a_category_and_an_attribution():
    for reason in {**TAXONOMY, **EXTRA_REASONS}:
        assert category_of(reason) in CATEGORIES
        assert attribution_of(reason) in ("infrastructure", "user")
    assert category_of(UNKNOWN) is None and attribution_of(UNKNOWN) is None
    for rule in load_rules():
        assert rule.category == category_of(rule.reason)
