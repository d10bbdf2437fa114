"""``python -m acme``: the command line (see ``acme.cli``)."""

if __name__ == "__main__":  # Airflow's plugin loader imports every module under plugins/
    from acme.cli import main

    raise SystemExit(main())
