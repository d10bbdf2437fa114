"""Nightly monitoring ingest: DCGM, node and IPMI metrics into the lake, validated and rolled up.

- ``catalog``: the metric list, PromQL, units, ranges (``include/metrics/metrics.yaml``)
- ``prometheus`` / ``exposition`` / ``acmetrace_csv``: the three inputs, parsed to canonical samples
- ``validate``: ranges, NaN/Inf, duplicates, ordering, counter resets, coverage, stale devices
- ``storage``: compact partitions, 5-minute rollups and mergeable daily histograms
- ``synth``: deterministic synthetic telemetry calibrated to the AcmeTrace quantile curves
- ``ingest``: all of it for one input (``python -m acme ingest-metrics``)
"""
