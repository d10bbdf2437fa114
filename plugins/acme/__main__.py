"""``python -m acme``: the command line (see ``acme.cli``)."""

if __name__ == "__main__":  # Airflow's plugin loader imports every module under plugins/
    import gc

    from acme.cli import main

    status = main()
    # The interpreter's teardown runs the cyclic garbage collector over every object still alive:
    # after an ingest that has imported great-expectations (about 230,000 objects, most of them its
    # pydantic classes) that took 0.7-1.0 s of a 5 s command. Frozen objects are left out of it;
    # atexit handlers, stream flushes and module teardown still run.
    gc.freeze()
    raise SystemExit(status)
