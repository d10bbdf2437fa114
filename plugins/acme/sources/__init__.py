"""Parsers of job sources (AcmeTrace CSV, Slurm sacct, Kubernetes) into the canonical job record."""
