"""Cost of the report's page-wide HiDPI figures (issue 17).

One month report (seren, the three bundled days 2023-07-01..03 plus one synthesized node's
telemetry per day) is characterized once; its figures are then rendered ``--runs`` times at the
size the report uses (``FIGURE_WIDTH_IN`` wide at ``DPI``: page width at twice the CSS pixels) and
at the size it used before (6 in wide at 90 dpi). Per size: median CPU and wall time of rendering
all figures, and the PNG bytes. CPU time is the steadier figure on a shared machine.

Results go to benchmarks/results/report_figures.json.
Usage: python benchmarks/bench_report_figures.py [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "plugins"))
RESULTS = ROOT / "benchmarks" / "results" / "report_figures.json"
DAYS = ("2023-07-01", "2023-07-02", "2023-07-03")
SIZES = {"page width at 2x (now)": (None, None), "6 in at 90 dpi (before)": (6.0, 90)}


def build_lake(folder: Path):
    from acme.jobs.ingest import JobInput, ingest_job_file
    from acme.lake import Lake
    from acme.metrics.ingest import ingest_metrics_file
    from acme.metrics.synth import write_synth_metrics

    lake = Lake(str(folder / "lake"))
    for seed, day in enumerate(DAYS, start=1):
        path = ROOT / "include" / "sample_data" / "jobs" / "seren" / f"{day}.csv"
        ingest_job_file(lake, JobInput("seren", "acmetrace", str(path)), path)
        exported = folder / "metrics" / day
        write_synth_metrics("seren", 1, date.fromisoformat(day), 1, "acmetrace-csv", exported, seed=seed)
        ingest_metrics_file(lake, "acmetrace-csv", "seren", str(exported), date.fromisoformat(day))
    return lake


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    from acme.report import figures, sections, style
    from acme.report.characterize import characterize
    from acme.report.periods import parse_period

    now = (figures.FIGURE_WIDTH_IN, style.DPI)
    with tempfile.TemporaryDirectory() as folder:
        report = characterize(build_lake(Path(folder)), "seren", parse_period("2023-07"))
    results = {}
    for label, (width, dpi) in SIZES.items():
        figures.FIGURE_WIDTH_IN = style.FIGURE_WIDTH_IN = width or now[0]
        style.DPI = dpi or now[1]
        sections.render_figures(report)  # warm: fonts and caches
        cpu, wall = [], []
        for _ in range(args.runs):
            started_cpu, started = time.process_time(), time.perf_counter()
            pngs = sections.render_figures(report)
            cpu.append(time.process_time() - started_cpu)
            wall.append(time.perf_counter() - started)
        results[label] = {
            "figures": len(pngs),
            "median_cpu_s": round(statistics.median(cpu), 3),
            "median_wall_s": round(statistics.median(wall), 3),
            "png_bytes": sum(len(p) for p in pngs.values()),
            "width_px": {name: figures_width(png) for name, png in pngs.items()},
        }
        print(f"{label}: {json.dumps({k: v for k, v in results[label].items() if k != 'width_px'})}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"runs": args.runs, "results": results}, indent=1))


def figures_width(png: bytes) -> int:
    from acme.report.publish import png_size

    return png_size(png)[0]


if __name__ == "__main__":
    main()
