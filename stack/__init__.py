"""`make stack`: the production topology of acme-pipeline run from the venv, without containers."""
