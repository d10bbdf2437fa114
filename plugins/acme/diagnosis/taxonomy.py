"""The failure taxonomy the diagnosis answers in: the paper's reasons and categories, the reasons this
project adds, and who each reason is attributed to. The rules (``acme.diagnosis.rules``), the general
root-cause layers (``acme.diagnosis.rootcause``), learning and the reports all read it from here."""

from __future__ import annotations

# The paper's failure taxonomy (reference failure_taxonomy.csv): reason -> category.
TAXONOMY: dict[str, str] = {
    "NVLinkError": "Infrastructure", "CUDAError": "Infrastructure", "NodeFailure": "Infrastructure",
    "ECCError": "Infrastructure", "NetworkError": "Infrastructure", "ConnectionError": "Infrastructure",
    "S3StorageError": "Infrastructure", "NCCLTimeoutError": "Infrastructure", "NCCLRemoteError": "Infrastructure",
    "DataloaderKilled": "Framework", "AttributeError": "Framework", "OutOfMemoryError": "Framework",
    "RuntimeError": "Framework", "AssertionError": "Framework", "ValueError": "Framework",
    "ZeroDivisionError": "Framework", "ModelLoadingError": "Framework", "DatasetLoadingError": "Framework",
    "FileNotFoundError": "Script", "OSError": "Script", "TypeError": "Script", "NameError": "Script",
    "PermissionError": "Script", "ImportError": "Script", "KeyError": "Script", "SyntaxError": "Script",
    "ArgumentError": "Script", "CalledProcessError": "Script", "IndexError": "Script",
}  # fmt: skip
# Reasons added to the taxonomy by this project (see rules.yaml's header for why).
EXTRA_REASONS: dict[str, str] = {
    "LossSpike": "Framework",  # NaN/Inf loss or gradient norm, loss-scale collapse
    "GPUDriverFault": "Infrastructure",  # GSP/micro-controller Xids, NVML driver mismatch
    "NCCLError": "Infrastructure",  # NCCL/RCCL system, internal, CUDA and usage errors (not timeouts)
    "SideServiceError": "Infrastructure",  # wandb, metrics pushers, log shippers unreachable
    "SegmentationFault": "Framework",  # SIGSEGV in native code (exit code 139 / -11)
    "FailSlow": "Infrastructure",  # a running job's node much slower than its peers (acme.detection)
    "UserCancelled": "Script",  # the user interrupted the run (KeyboardInterrupt, Ctrl-C / SIGINT)
    # Outside the taxonomy: the job was ended from outside.
    "SchedulerTimeLimit": "External",  # Slurm TIMEOUT, "DUE TO TIME LIMIT", Kubernetes DeadlineExceeded
    "Preempted": "External",  # Slurm PREEMPTED / requeue
    "JobCancelled": "External",  # scancel / CANCELLED by a user
    "PodEvicted": "External",  # kubelet node-pressure eviction
    "AdmissionError": "External",  # Kubernetes UnexpectedAdmissionError (device plugin could not allocate)
    "KilledBySignal": "External",  # SIGKILL/SIGTERM (exit 137/143) with no cause logged
}
EXTERNAL_ATTRIBUTION: dict[str, str] = {
    "SchedulerTimeLimit": "user",  # the requested wall time ran out
    "JobCancelled": "user",
    "Preempted": "infrastructure",
    "PodEvicted": "infrastructure",
    "AdmissionError": "infrastructure",
    "KilledBySignal": "infrastructure",  # the job's own code did not fail; something outside killed it
}
CATEGORIES = ("Infrastructure", "Framework", "Script", "External")
ATTRIBUTIONS = ("infrastructure", "user")
UNKNOWN = "Unknown"


def category_of(reason: str) -> str | None:
    """The category of a reason (None for Unknown or a reason this version does not know)."""
    return {**TAXONOMY, **EXTRA_REASONS}.get(reason)


def attribution_of(reason: str) -> str | None:
    """Who a reason is usually attributed to: infrastructure for Infrastructure, the user for Framework
    and Script, and per outcome for External (:data:`EXTERNAL_ATTRIBUTION`); None for Unknown."""
    category = category_of(reason)
    if category is None:
        return None
    if category == "External":
        return EXTERNAL_ATTRIBUTION[reason]
    return "infrastructure" if category == "Infrastructure" else "user"
