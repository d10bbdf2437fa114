#!/bin/bash
# Entrypoint of the offline Airflow image, as the official image's does it for this deployment:
# `bash ...`/`python ...` run as they are, anything else (`celery worker` too) is an airflow subcommand.
set -e
case "${1:-}" in
    bash | sh | python | python3) exec "$@" ;;
    airflow) shift ;;
esac
exec airflow "$@"
