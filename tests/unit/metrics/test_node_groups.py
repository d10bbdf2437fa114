"""A day split by node group: which nodes a group reads, its rejects, and the merge of its rollups."""

from __future__ import annotations

from datetime import date

import pytest

from acme.errors import ConfigError
from acme.lake import Lake
from acme.metrics.acmetrace_csv import parse_wide_csv
from acme.metrics.node_groups import (
    check_node_groups,
    merge_histograms,
    merge_rollups,
    node_group_of,
    select_node_group,
)
from acme.metrics.storage import histogram, histogram_table, rollup_5m

from .conftest import make_samples

DAY = date(2023, 7, 1)
NODES = [f"node{i}" for i in range(12)]


def day_samples():
    return make_samples(
        "gpu_util",
        {(node, gpu): [(t, float((i * 7 + gpu + t // 15) % 100)) for t in range(0, 1800, 15)]
         for i, node in enumerate(NODES) for gpu in (1, 0)},
    )  # fmt: skip


def test_every_node_is_in_exactly_one_group_and_the_groups_hold_every_sample():
    samples = day_samples()
    parts = [select_node_group(samples, (g, 4)) for g in range(4)]
    assert sum(len(p) for p in parts) == len(samples)
    for g, part in enumerate(parts):
        assert set(part.series["node"]) == {n for n in NODES if node_group_of(n, 4) == g}
        assert part.series_id.max() < part.n_series
    assert node_group_of("node3", 4) == node_group_of("node3", 4)  # stable: no per-process hash seed


def test_merged_group_rollups_and_histograms_are_the_single_tables(catalog):
    samples = day_samples()
    spec = catalog["gpu_util"]
    parts = [select_node_group(samples, (g, 3)) for g in range(3)]
    merged = merge_rollups([rollup_5m(p, DAY) for p in reversed(parts)])  # any order of the parts
    assert merged.equals(rollup_5m(samples, DAY))
    hists = merge_histograms([histogram_table(histogram(p.value, spec)) for p in parts])
    assert hists.equals(histogram_table(histogram(samples.value, spec)))


def test_a_group_reads_only_its_columns_and_the_files_rejects_are_the_first_groups(tmp_path, catalog):
    columns = [f"{node}-{gpu}" for node in NODES[:6] for gpu in (0, 1)] + ["not a gpu column"]
    rows = [
        f"2023-07-01 08:00:{s:02d}+08:00," + ",".join(str(i) for i in range(len(columns))) for s in (0, 15)
    ]
    path = tmp_path / "gpu_util.csv"
    path.write_text("\n".join(["Time," + ",".join(columns), *rows, "2023-07-01 08:00:30+08:00,1,2"]) + "\n")
    whole = parse_wide_csv(path, catalog["gpu_util"])
    groups = [parse_wide_csv(path, catalog["gpu_util"], node_group=(g, 2)) for g in range(2)]
    assert sum(len(p.samples) for p in groups) == len(whole.samples) == 24
    for g, part in enumerate(groups):
        assert set(part.samples.series["node"]) == {n for n in NODES[:6] if node_group_of(n, 2) == g}
    assert len(groups[0].rejects) == len(whole.rejects) == 2  # the short row and the unmappable column
    assert groups[1].rejects.empty


def test_a_bad_cell_is_rejected_by_the_group_of_its_column(tmp_path, catalog):
    path = tmp_path / "gpu_util.csv"
    path.write_text("Time,node0-0,node4-0\n2023-07-01 08:00:00+08:00,oops,5\n2023-07-01 08:00:15+08:00,1,6\n")
    owner = node_group_of("node0", 2)
    assert node_group_of("node4", 2) == 1 - owner
    parts = {g: parse_wide_csv(path, catalog["gpu_util"], node_group=(g, 2)) for g in range(2)}
    assert len(parts[owner].rejects) == 1 and "oops" in parts[owner].rejects["record"].iloc[0]
    assert parts[1 - owner].rejects.empty and len(parts[1 - owner].samples) == 2


def test_a_group_count_must_be_a_positive_integer():
    assert check_node_groups(8, "Param node_groups") == 8
    for bad in (0, -2, True, "4", 2.5):
        with pytest.raises(ConfigError, match="node_groups must be a positive integer"):
            check_node_groups(bad, "Param node_groups")


def test_a_missing_group_is_not_merged(tmp_path):
    from acme.errors import InputError
    from acme.metrics.node_groups import merge_node_groups

    manifest = {"cluster": "seren", "day": "2023-07-01", "input_key": "k", "node_group": [0, 2],
                "metrics": [], "samples": 0, "series": 0, "quarantined": 0, "partitions": [], "bytes": 0,
                "mode": "daily"}  # fmt: skip
    with pytest.raises(InputError, match=r"node groups \[1\] of 2 have no manifest"):
        merge_node_groups(Lake(str(tmp_path)), [manifest])
