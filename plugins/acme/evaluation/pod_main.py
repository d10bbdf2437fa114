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

    from acme.evaluation import settings
    from acme.lake import open_lake

    try:
        if args.step == "preload":
            from acme.evaluation.precursor import preload_model

            lake = open_lake()
            options = lake.storage_options if args.location.startswith("s3://") else None
            result = preload_model(args.location, settings.shm_dir(), args.model_id, options).to_dict()
        else:
            from acme.evaluation.layout import EvalRun
            from acme.evaluation.trial_steps import run_inference

            result = run_inference(
                open_lake(),
                EvalRun(args.model_id, args.run),
                args.trial,
                settings.shm_dir(),
                settings.data_dir(),
                settings.gpu_lease_timeout_s(),
            )
    except AcmeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
