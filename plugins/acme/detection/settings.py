"""Thresholds of hang and fail-slow detection: environment variables with defaults, read when asked.

Why these defaults (the README's "Hang and fail-slow detection" section has the measurements):

* A hung collective keeps the NCCL kernel resident and spinning: nvidia-smi reads 100 % while the power
  stays near idle and nothing moves (NVIDIA/nccl#968, #257, #238, #537, cupy/cupy#3557). Tensor cores do
  nothing and RDMA traffic stops -- the two signals ByteRobust (Wan et al., SOSP'25) checks ("zero RDMA
  traffic for minutes, low tensor-core activity"). Healthy pauses of a training job (checkpoint writes,
  data-loading stalls) run no kernel at all, and evaluation passes use tensor cores, so the signature
  "tensor < 0.5 % and RDMA < 1 MB/s while GPU utilization >= 90 %" does not occur in a healthy job and
  ``ACME_DETECT_HANG_MINUTES`` can be short: 2.5 min, which with a DAG every 2 min keeps the detection
  under the 5-minute goal. SM activity is not required to be near 0: one thread block per NCCL channel
  (up to 32 on A100) keeps up to ~30 % of the 108 SMs active (``ACME_DETECT_HANG_SM_MAX``, 40 %).
* A hang with no kernel resident (a deadlock in Python or the data loader) looks like a healthy pause;
  it is called a stall only after ``ACME_DETECT_STALL_MINUTES`` (10 min, ByteRobust's "0 RDMA traffic
  within 10 mins"), longer than the checkpoint writes and data stalls of a healthy job.
* A checkpoint write idles the GPUs and the RDMA network too, and its end -- every rank waiting in a
  barrier for the slowest writer -- is a hang's exact signature. What tells them apart is the shared file
  system: a node writing at least ``ACME_DETECT_STORAGE_WRITE_BPS`` (10 MB/s) is writing a checkpoint.
  A per-node checkpoint shard is GBs (a 123B model's weights and Adam states, ~14 B a parameter, are
  ~1.7 TB, ~7 GB per node of 256) written in minutes, i.e. 10s to 100s of MB/s, while a training node's
  background writes (logs, metrics) are kB/s to ~1 MB/s. So a pause or spin while some node writes is a
  checkpoint (never a hang nor a stall), and a spin while no node writes is a hang after
  ``ACME_DETECT_HANG_MINUTES`` even right after a pause. The writes come from the ``storage_write``
  metric (metrics lake; from Prometheus through ``ACME_DETECT_STORAGE_WRITE_PROMQL``, default the NFS
  client bytes of node_exporter's mountstats collector); where it is not published, spinning right after
  a pause waits for the stall rule, as a checkpoint barrier may be what it is.
* Fail-slow: a node whose median GPU SM activity, or whose InfiniBand traffic, is below
  ``ACME_DETECT_SLOW_RATIO`` (0.7, the relative performance threshold of NVIDIA's straggler detection in
  nvidia-resiliency-ext) times its peers' median in ``ACME_DETECT_SLOW_WINDOWS`` (3) consecutive windows
  of ``ACME_DETECT_SLOW_WINDOW_MINUTES`` (5) while the job computes (peers' SM >= 10 %). ByteRobust
  flags the degrader after 5 rounds; three 5-minute windows keep a one-off slow window (a long data
  shard, a GC pause) from raising an alarm.
"""

from __future__ import annotations

from dataclasses import dataclass

from acme.config import env, env_number

SOURCES = ("auto", "lake", "prometheus")
STORAGE_WRITE_PROMQL = "sum by (instance) (rate(node_mountstats_nfs_total_write_bytes_total{$shard}[1m]))"


@dataclass(frozen=True)
class DetectionSettings:
    hang_minutes: float = 2.5
    stall_minutes: float = 10.0
    hang_tensor_max: float = 0.5  # % tensor-core activity that counts as none
    hang_sm_max: float = 40.0  # % SM activity a spinning NCCL kernel can still show
    busy_util_min: float = 90.0  # % GPU utilization: a kernel is resident
    ib_idle_bps: float = 1e6  # per node, transmitted + received
    storage_write_bps: float = (
        10e6  # per node: at least this written to the shared file system = a checkpoint
    )
    storage_write_promql: str = STORAGE_WRITE_PROMQL  # "" (set to "none"): not read from Prometheus
    min_coverage: float = 0.8  # share of a job's GPUs with a sample in a step for the step to count
    slow_ratio: float = 0.7
    slow_windows: int = 3
    slow_window_minutes: float = 5.0
    slow_active_sm_min: float = 10.0  # peers' SM % above which the job counts as computing
    slow_min_nodes: int = 3
    job_lookback_days: int = 14
    source: str = "auto"

    @property
    def lookback_minutes(self) -> float:
        """How much telemetry one pass reads: enough for the longest rule."""
        return max(self.stall_minutes, self.hang_minutes, self.slow_windows * self.slow_window_minutes) + 1

    @classmethod
    def from_env(cls) -> DetectionSettings:
        from acme.errors import ConfigError

        source = env("ACME_DETECT_SOURCE", "auto").lower()
        if source not in SOURCES:
            raise ConfigError(f"ACME_DETECT_SOURCE={source!r} must be one of {', '.join(SOURCES)}")
        return cls(
            hang_minutes=env_number("ACME_DETECT_HANG_MINUTES", 2.5, low=0.25, high=120),
            stall_minutes=env_number("ACME_DETECT_STALL_MINUTES", 10, low=0.25, high=240),
            hang_tensor_max=env_number("ACME_DETECT_HANG_TENSOR_MAX", 0.5, low=0, high=100),
            hang_sm_max=env_number("ACME_DETECT_HANG_SM_MAX", 40, low=0, high=100),
            busy_util_min=env_number("ACME_DETECT_BUSY_UTIL_MIN", 90, low=0, high=100),
            ib_idle_bps=env_number("ACME_DETECT_IB_IDLE_BPS", 1e6, low=0),
            storage_write_bps=env_number("ACME_DETECT_STORAGE_WRITE_BPS", 10e6, low=1),
            storage_write_promql=_none_is_empty(
                env("ACME_DETECT_STORAGE_WRITE_PROMQL", STORAGE_WRITE_PROMQL)
            ),
            min_coverage=env_number("ACME_DETECT_MIN_COVERAGE", 0.8, low=0.01, high=1),
            slow_ratio=env_number("ACME_DETECT_SLOW_RATIO", 0.7, low=0.01, high=0.99),
            slow_windows=int(env_number("ACME_DETECT_SLOW_WINDOWS", 3, low=1, high=100, integer=True)),
            slow_window_minutes=env_number("ACME_DETECT_SLOW_WINDOW_MINUTES", 5, low=0.5, high=120),
            slow_active_sm_min=env_number("ACME_DETECT_SLOW_ACTIVE_SM_MIN", 10, low=0, high=100),
            slow_min_nodes=int(
                env_number("ACME_DETECT_SLOW_MIN_NODES", 3, low=3, high=100_000, integer=True)
            ),
            job_lookback_days=int(
                env_number("ACME_DETECT_JOB_LOOKBACK_DAYS", 14, low=1, high=366, integer=True)
            ),
            source=source,
        )


def _none_is_empty(value: str) -> str:
    return "" if value.lower() == "none" else value
