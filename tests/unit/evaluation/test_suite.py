"""Suite parsing: the bundled suite, defaults with warnings, bad rows, unusable files."""

from __future__ import annotations

import pytest

from acme.errors import InputError
from acme.evaluation.suite import (
    DEFAULT_N_SAMPLES,
    load_default_suite,
    normalize_metric_kind,
    parse_suite,
    read_suite,
)


def test_default_suite_has_public_sizes_and_no_warnings():
    suite = load_default_suite()
    assert 55 <= len(suite) <= 70
    assert suite.warnings == []
    sizes = {d.name: (d.n_samples, d.metric_kind) for d in suite.datasets}
    assert sizes["mmlu"] == (14042, "ppl")
    assert sizes["gsm8k"] == (1319, "match")
    assert sizes["humaneval"] == (164, "code_exec")
    assert sizes["mbpp"] == (500, "code_exec")
    assert sizes["math"] == (5000, "match")
    assert sizes["bbh"] == (6511, "match")
    assert sizes["arc_challenge"] == (1172, "ppl")
    assert sizes["hellaswag"] == (10042, "ppl")
    kinds = {d.metric_kind for d in suite.datasets}
    assert kinds == {"match", "code_exec", "judge", "ppl"}


def test_optional_columns_are_read():
    suite = parse_suite(
        "dataset,n_samples,metric_kind,gpu_s_per_sample,cpu_s_per_sample,n_choices\nx,10,ppl,0.5,0.01,5\n"
    )
    (d,) = suite.datasets
    assert (d.gpu_s_per_sample, d.cpu_s_per_sample, d.n_choices) == (0.5, 0.01, 5)
    assert suite.warnings == []


def test_unknown_size_gets_the_stated_default_and_blank_kinds_are_inferred_aloud():
    text = "dataset,n_samples,metric_kind\na,,match\nb,?,code\nc_gen_1d7fe4,12,\nd_ppl,7,\ne,abc,judge\n"
    suite = parse_suite(text, source="s.csv")
    by_name = suite.by_name()
    assert by_name["a"].n_samples == DEFAULT_N_SAMPLES
    assert by_name["b"].n_samples == DEFAULT_N_SAMPLES and by_name["b"].metric_kind == "code_exec"
    assert by_name["c_gen_1d7fe4"].metric_kind == "match"
    assert by_name["d_ppl"].metric_kind == "ppl"
    assert by_name["e"].n_samples == DEFAULT_N_SAMPLES and by_name["e"].metric_kind == "judge"
    joined = "\n".join(suite.warnings)
    assert "s.csv:2: a: size unknown; assuming 1000 samples" in joined
    assert "s.csv:4: c_gen_1d7fe4: no metric_kind; inferred 'match' from the name" in joined
    assert "s.csv:5: d_ppl: no metric_kind; inferred 'ppl' from the name" in joined
    assert "s.csv:6: e: n_samples 'abc' is not a number" in joined
    assert len(suite.warnings) == 5


@pytest.mark.parametrize(
    ("row", "problem"),
    [
        ("d,7,weird", "s.csv:2: d: unknown metric_kind 'weird'; valid kinds: match, code_exec, judge, ppl"),
        ("c,12,", "s.csv:2: c: no metric_kind, and the name states none (like _gen or _ppl); valid kinds"),
    ],
)
def test_a_kind_that_is_neither_known_nor_inferable_refuses_the_file_with_the_valid_kinds(row, problem):
    with pytest.raises(InputError) as refused:
        parse_suite(f"dataset,n_samples,metric_kind\n{row}\n", source="s.csv")
    assert str(refused.value).startswith(problem)


def test_opencompass_names_and_kinds_are_understood():
    """OpenCompass's config names and kind words; issue 14 item 6 (code_execution was turned into match)."""
    text = (
        "dataset,n_samples,metric_kind\n"
        "humaneval_gen_8e312c,164,\n"  # _gen of a code dataset: executed
        "sanitized_mbpp_gen_742f0c,257,\n"
        "gsm8k_gen_1d7fe4,1319,\n"
        "mmlu_ppl_ac766d,14042,\n"
        "winogrande_ll_c5cf57,1267,\n"
        "alignbench_llmjudge,683,\n"
        "apps,5000,code_execution\n"
        "lcb,400,gen\n"
        "mbpp_x,10,generation\n"
    )
    kinds = {d.name: d.metric_kind for d in parse_suite(text, source="oc.csv").datasets}
    assert kinds == {
        "humaneval_gen_8e312c": "code_exec",
        "sanitized_mbpp_gen_742f0c": "code_exec",
        "gsm8k_gen_1d7fe4": "match",
        "mmlu_ppl_ac766d": "ppl",
        "winogrande_ll_c5cf57": "ppl",
        "alignbench_llmjudge": "judge",
        "apps": "code_exec",
        "lcb": "match",
        "mbpp_x": "code_exec",
    }


def test_an_explicit_kind_is_kept_and_a_contradicting_name_is_said():
    suite = parse_suite("dataset,n_samples,metric_kind\nmmlu_ppl,10,gen\n", source="k.csv")
    assert suite.datasets[0].metric_kind == "match"
    assert suite.warnings == ["k.csv:2: mmlu_ppl: metric_kind 'gen' (match) kept; the name says ppl"]


def test_a_suite_without_a_kind_column_infers_every_kind():
    suite = parse_suite("dataset,n_samples\nhellaswag_ppl,10042\nhumaneval_gen,164\n", source="n.csv")
    assert [d.metric_kind for d in suite.datasets] == ["ppl", "code_exec"]


def test_bad_rows_are_dropped_or_repaired_with_warnings():
    text = (
        "# a comment\n"
        "dataset,n_samples,metric_kind,gpu_s_per_sample\n"
        "ok,100,match,\n"
        ",50,match,\n"  # no name: dropped
        "neg,-5,match,\n"  # negative: dropped
        "zero,0,ppl,\n"  # zero: dropped
        "ok,200,match,\n"  # duplicate: dropped
        "comma,in,name,10,match,\n"  # too many fields: dropped
        "half,12.6,match,\n"  # not whole: rounded
        "badgpu,10,match,-1\n"  # negative optional number: ignored
    )
    suite = parse_suite(text, source="bad.csv")
    assert [d.name for d in suite.datasets] == ["ok", "half", "badgpu"]
    assert suite.by_name()["ok"].n_samples == 100
    assert suite.by_name()["half"].n_samples == 13
    assert suite.by_name()["badgpu"].gpu_s_per_sample is None
    joined = "\n".join(suite.warnings)
    assert "bad.csv:4: no dataset name; row dropped" in joined
    assert "bad.csv:5: neg: n_samples -5 is not positive; row dropped" in joined
    assert "bad.csv:6: zero: n_samples 0 is not positive" in joined
    assert "bad.csv:7: dataset 'ok' already listed on line 3" in joined
    assert "bad.csv:8: 6 fields for 4 columns" in joined
    assert "bad.csv:9: half: n_samples 12.6 is not whole; using 13" in joined
    assert "bad.csv:10: badgpu: gpu_s_per_sample -1 is negative" in joined


def test_kind_aliases_fold_case_and_spelling():
    assert normalize_metric_kind("GEN") == "match"
    assert normalize_metric_kind("gen", "humaneval") == "code_exec"
    assert normalize_metric_kind("Code-Execution") == "code_exec"
    assert normalize_metric_kind("Pass@1") == "code_exec"
    assert normalize_metric_kind("LLM-Judge") == "judge"
    assert normalize_metric_kind("loglikelihood") == "ppl"
    assert normalize_metric_kind("nonsense") is None


def test_unknown_columns_warn_and_bom_is_ignored():
    suite = parse_suite("\ufeffdataset,n_samples,metric_kind,owner\nx,3,match,me\n", source="u.csv")
    assert suite.datasets[0].name == "x"
    assert suite.warnings == ["u.csv:1: ignoring unknown column(s) owner"]


def test_missing_file_is_an_input_error(tmp_path):
    missing = tmp_path / "nope.csv"
    with pytest.raises(InputError, match="nope.csv: cannot read the suite file"):
        read_suite(missing)


def test_empty_or_headerless_files_are_input_errors(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("# only a comment\n\n")
    with pytest.raises(InputError, match="empty.csv: empty suite"):
        read_suite(empty)


def test_missing_required_column_names_file_and_line(tmp_path):
    path = tmp_path / "cols.csv"
    path.write_text("# comment\ndataset,samples,metric_kind\nx,3,match\n")
    with pytest.raises(InputError) as info:
        read_suite(path)
    assert info.value.line == 2
    assert "cols.csv:2: header lacks required column(s) n_samples" in str(info.value)


def test_no_usable_row_and_binary_files_are_input_errors(tmp_path):
    dropped = tmp_path / "dropped.csv"
    dropped.write_text("dataset,n_samples,metric_kind\nx,-1,match\n")
    with pytest.raises(InputError, match="no usable dataset row"):
        read_suite(dropped)
    binary = tmp_path / "binary.csv"
    binary.write_bytes(b"dataset,n_samples\n\xff\xfe\x00")
    with pytest.raises(InputError, match="not UTF-8"):
        read_suite(binary)
