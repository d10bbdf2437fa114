"""Entry point of the evaluation's pods (kubernetes backend): the same steps as the local backend.

    python -m acme.evaluation.pod_main preload --location URL --model-id ID
    python -m acme.evaluation.pod_main infer --model-id ID --run RUN --trial TRIAL

Configuration comes from the pod's environment (``ACME_LAKE_URI``, ``ACME_EVAL_SHM_DIR`` — the
node's shared-memory folder mounted from the host —, ``ACME_EVAL_DATA_DIR``; S3 credentials from
the standard AWS variables). Prints one JSON line (the step's manifest); exits 2 with a one-line
error on bad input, as the command line does.
"""

from __future__ import annotations

import argparse
import json
import sys

from acme.errors import AcmeError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m acme.evaluation.pod_main")
    steps = parser.add_subparsers(dest="step", required=True)
    preload = steps.add_parser("preload", help="copy the checkpoint into node shared memory")
    preload.add_argument("--location", required=True)
    preload.add_argument("--model-id", required=True)
    infer = steps.add_parser("infer", help="run one trial's inference")
    infer.add_argument("--model-id", required=True)
    infer.add_argument("--run", required=True)
    infer.add_argument("--trial", required=True)
    args = parser.parse_args(argv)

    from acme import settings
    from acme.evaluation.runners import LocalTrialRunner
    from acme.lake import open_lake

    # Inside the pod the steps are the local runner's (the pod is the node's local worker).
    runner = LocalTrialRunner(
        settings.evaluation().shm_dir,
        settings.evaluation().data_dir,
        settings.evaluation().gpu_lease_timeout_s,
    )
    try:
        if args.step == "preload":
            evaluation = {"model_location": args.location, "model_id": args.model_id}
            result = runner.preload(open_lake(), evaluation, {"node": None})
        else:
            trial = {"model_id": args.model_id, "run": args.run, "trial_id": args.trial}
            result = runner.infer(open_lake(), trial)
    except AcmeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
