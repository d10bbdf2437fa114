"""Hang and fail-slow detection of running GPU jobs from their telemetry (plain Python, no Airflow).

``running`` (which GPU jobs run at a moment, from the jobs lake), ``telemetry`` (a job's recent samples
on one time grid, from the metrics lake or Prometheus, storage writes included), ``detect`` (the two
detectors on that grid), ``evidence`` (a suspect's evidence log and the diagnosis it starts), ``run`` (one
detection pass over a cluster, what the ``detect_hangs`` DAG and ``python -m acme detect-hangs`` call) and
``scenario`` (synthesized jobs, storage writes and lakes for the tests and the benchmark). The thresholds
are ``acme.settings.DetectionSettings``.
"""
