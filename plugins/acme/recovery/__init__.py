"""Recovery after a training crash: find the faulty nodes, pick the checkpoint to restart from.

The paper's fast fault detection and recovery (after DLRover): a two-round all-gather check
localizes faulty nodes and stragglers (``localize``, run on each world by ``allgather_check``),
a blast-radius limit decides whether they may be cordoned (``blast_radius``), and the last healthy
checkpoint before any loss spike is chosen with the batches to skip (``checkpoints``).
"""
