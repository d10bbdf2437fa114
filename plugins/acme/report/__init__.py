"""The characterization report: the NSDI'24 paper's figures and tables for one cluster and period.

``build_report(lake, cluster, period, out=None)`` queries the lake with DuckDB
(``include/sql/report``), draws the figures, renders the page from ``include/report/templates``
and publishes it with its tables under ``reports/cluster=<c>/period=<p>/`` (or a local folder),
then refreshes the index of all reports. See :mod:`acme.report.build`.
"""
