"""The filter rules rewritten for speed (issue 27) match exactly the lines their plain forms matched, and
searching a rule's anchored and unanchored alternatives apart finds what one search of the rule finds.

The plain forms below are the rules as they were before the rewrite (main at c841e83); a rule not listed here
was not rewritten, and its regex must be the same as then.
"""

from __future__ import annotations

import re

import pytest
from benchmarks.bench_compress_logs import long_log_lines, real_corpus_lines

from acme.diagnosis.compress import (
    FilterRule,
    compress_log,
    load_filter_rules,
    rule_search,
    strip_prefix,
    top_level_alternatives,
)

PLAIN_FORMS = {
    "deepspeed_step": r"\[Rank \d+\] step=\d+, skipped=\d+|RunningAvgSamplesPerSec=|\bsamples/sec:\s*[\d.]+"
    r"|see_memory_usage|\bMA [\d.]+ GB\s+Max_MA",
    "progress_bar": r"\d+%\|[^|]*\|\s*\d+/\d+|\|[#█▏▎▍▌▋▊▉ ]{3,}\||\[\d+:\d+(?::\d+)?<[\d:?]+,\s*[\d.?]+\s*(?:it/s|s/it)",
    "init_banner": r"(?i)^\s*>\s*(?:initializing|building|compiling|setting|finished|done|padded|number of parameters"
    r"|learning rate decay|loading|fetching)|^\s*(?:Setting OMP_NUM_THREADS|using world size"
    r"|initializing torch distributed|W&B|wandb:)|time to initialize megatron|\bcompiling dataset index builder\b",
    "repeated_warning": r"(?i)\b(?:UserWarning|FutureWarning|DeprecationWarning|RuntimeWarning|warnings\.warn)\b"
    r"|^\s*\[?W(?:ARNING)?\]?[\s:\]]",
}
UNCHANGED = {
    "megatron_iteration", "generic_step_metrics", "hf_trainer_metrics", "nccl_info", "banner_rule",
    "config_dump_dots", "config_dump_kv", "config_dump_json", "timestamp_only", "checkpoint_io_info",
}  # fmt: skip

# Lines at the edges of the rewrites: word boundaries before a letter, a digit before "%", the letters that
# (?i) matches with others (dotless i, Kelvin sign, long s), cases, starts of lines.
EDGE_LINES = [
    "samples/sec: 12.5", " samples/sec: 1", "xsamples/sec: 1", "_samples/sec: 1", "ésamples/sec: 1",
    "samples/sec:", "samples/sec: x", "[Rank 3] step=10, skipped=0", "RunningAvgSamplesPerSec=3",
    "see_memory_usage", "MA 1.5 GB  Max_MA 2 GB", "xMA 1.5 GB Max_MA", "(MA 1 GB\tMax_MA", "MA 1 GB Max_MA",
    "50%|#####     | 5/10", "%|##| 5/10", "x%|##| 5/10", "5%|| 1/2", "٣%|x| 1/2", "100%|██████████|",
    "|###|", "[00:01<00:02, 3.5it/s]", "[1:02:03<?, ?it/s]",
    "> initializing torch", "  > Building model", "> ınitializing", "> İnitializing", "ſetting OMP_NUM_THREADS=1",
    "time to initialize megatron (seconds): 3", "TIME TO INITIALIZE MEGATRON", "Time to initialize Megatron",
    "xtime to initialize megatron", "compiling dataset index builder ...", "> compiling dataset index builder",
    "xcompiling dataset index builder", "_compiling dataset index builder", "Compiling Dataset Index Builder!",
    "compiling dataset index builders", "compılıng dataset ındex builder", "wandb: syncing", "W&B run",
    "UserWarning: x", "foo.py:3: UserWarning: x", "xUserWarning", "UserWarnings", "userwarning", "USERWARNING:",
    "uſerWarning", "FutureWarning", "DeprecationWarning:", "RuntimeWarning", "runtimewarnıng",
    "warnings.warn(", "Xwarnings.warn", "warnings.warned", "WARNINGS.WARN", "_UserWarning", "1UserWarning",
    "W foo", "[W] foo", "WARNING: x", " [WARNING] x", "warning: x", "Warning x", "W:", "W", "WARN x", "[W",
    "Kelvin K", "ẞ ß", "",
]  # fmt: skip


@pytest.fixture(scope="module")
def texts() -> list[str]:
    """Distinct lines of the corpus's real logs and of the long real log, raw and as the rules see them
    (prefix stripped, the last carriage-return update), the edge lines, and variants of the lines a plain
    form matches, one per shape (other cases, the letters (?i) matches with others, a letter or digit before)."""
    lines = set(real_corpus_lines()) | set(long_log_lines()) | set(EDGE_LINES)
    seen = set(lines)
    for line in lines:
        segments = [seg for seg in line.split("\r") if seg.strip()] or [line]
        seen.add(strip_prefix(segments[-1])[0])
    plain = [re.compile(regex) for regex in PLAIN_FORMS.values()]
    # One matched line per shape (its digits masked): progress bars differ in their numbers only.
    matched = {re.sub(r"\d+", "0", text): text for text in sorted(seen) if any(p.search(text) for p in plain)}
    for text in matched.values():
        seen.update(
            {
                text.upper(), text.lower(), text.swapcase(), "x" + text, "_" + text, "7" + text, " " + text,
                text.replace("s", "ſ"), text.replace("i", "ı"), text.replace("I", "İ"), text.replace("k", "\u212a"),
                text.replace("%", "x%", 1), text.replace(" ", "x", 1), text.replace("\\b", ""),
            }
        )  # fmt: skip
    return sorted(seen)


@pytest.fixture(scope="module")
def rules() -> dict[str, FilterRule]:
    return {rule.id: rule for rule in load_filter_rules()}


def test_the_rules_are_the_plain_forms_and_the_unchanged_ones(rules):
    assert set(rules) == set(PLAIN_FORMS) | UNCHANGED
    for rule_id in PLAIN_FORMS:
        assert rules[rule_id].pattern.pattern != PLAIN_FORMS[rule_id], rule_id


def test_each_rewritten_rule_matches_exactly_the_lines_its_plain_form_matches(texts, rules):
    assert len(texts) > 100_000
    for rule_id, regex in PLAIN_FORMS.items():
        plain = re.compile(regex)
        rule = rules[rule_id]
        expected = [plain.search(text) is not None for text in texts]
        found = [bool(rule.search(text)) for text in texts]
        one_search = [rule.pattern.search(text) is not None for text in texts]
        differ = [text for text, e, f in zip(texts, expected, found, strict=True) if e != f]
        assert not differ, (rule_id, differ[:5])
        assert one_search == expected, rule_id  # the rewritten regex itself, searched in one piece
        assert 0 < sum(expected) < len(texts), rule_id


def _plain_rules(rule_list: list[FilterRule], regexes: dict[str, str]) -> list[FilterRule]:
    """The rules with the given regexes, each matched by one plain ``search`` of its regex."""
    out = []
    for rule in rule_list:
        pattern = re.compile(regexes.get(rule.id, rule.pattern.pattern))
        out.append(
            FilterRule(rule.id, pattern, rule.description, rule.version, rule.keep_first, pattern.search)
        )
    return out


def _output(compressed) -> dict:
    out = compressed.to_dict()
    out["stats"].pop("seconds")
    return out


@pytest.mark.parametrize("source", ["corpus", "long log"])
def test_the_compressed_logs_are_the_same_as_with_the_plain_rules(source):
    lines = real_corpus_lines() if source == "corpus" else long_log_lines()
    rule_list = load_filter_rules()
    new = compress_log(lines, rule_list)
    old = compress_log(lines, _plain_rules(rule_list, PLAIN_FORMS))
    assert _output(new) == _output(old)
    assert sum(new.stats["dropped_by_rule"].values()) > len(lines) // 10
    assert new.stats["kept_errors"] > 0


def test_top_level_alternatives_skip_groups_classes_and_escapes():
    assert top_level_alternatives(r"a|b(c|d)|[|]x|\||[]|]|[^]|]y") == [
        "a",
        "b(c|d)",
        "[|]x",
        r"\|",
        "[]|]",
        "[^]|]y",
    ]
    assert top_level_alternatives(r"^a(?i:b|c)") == [r"^a(?i:b|c)"]


@pytest.mark.parametrize(
    ("regex", "split"),
    [
        (r"(?i)^\s*x|foo", True),
        (r"^a|b|^c", True),
        (r"a|b", False),  # nothing anchored
        (r"^a|^b", False),  # nothing unanchored
        (r"^(a)|b\1", False),  # a group reference
        (r"(?x)^a | b", False),  # verbose: a "|" may sit in a comment
    ],
)
def test_a_rule_is_searched_in_two_parts_only_where_that_is_safe(regex, split):
    pattern = re.compile(regex)
    search = rule_search(pattern)
    assert (search != pattern.search) is split
    for text in ["x", "  X", "a FOO", "a x", "b", "ab", "cb", "c", "aa", " a", "b a"]:
        assert bool(search(text)) == (pattern.search(text) is not None), (regex, text)


def test_global_flags_apply_to_both_parts():
    search = rule_search(re.compile(r"(?i)^warn|error"))
    assert search("WARN x") and search("an ERROR") and not search("no")
