"""Recovery after a training crash: find the faulty nodes, pick the checkpoint to restart from.

The paper's fast fault detection and recovery (after DLRover): a two-round all-gather check
localizes faulty nodes and stragglers (``localize``, run on each world by ``allgather_check``),
a blast-radius limit decides whether they may be cordoned (``blast_radius``), and the last healthy
checkpoint before any loss spike is chosen with the batches to skip (``checkpoints``).

A hang whose PyTorch Flight Recorder dumps name the ranks that never entered the stuck collective (or
entered a mismatched one) skips the two-round check: ``flight_recorder`` reads the per-rank dumps (no torch
needed) and maps those ranks to nodes, and ``recover`` takes its verdict when it is conclusive and records
why not otherwise (docs/flight_recorder.md).
"""
