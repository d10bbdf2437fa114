"""acme: domain logic of the acme-pipeline (plain Python, importable without Airflow)."""

__version__ = "0.1.0"
