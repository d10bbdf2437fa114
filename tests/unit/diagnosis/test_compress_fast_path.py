"""The compressor's fast path (issue 27): what it remembers per distinct text, the trie of error triggers and the
mask's lookahead change no kept line; its memory stays bounded."""

from __future__ import annotations

import re

import pytest
from benchmarks.bench_compress_logs import real_corpus_lines

from acme.diagnosis.compress import (
    _ERROR_TRIGGER_RE,
    _ERROR_TRIGGERS,
    _MASK_RE,
    LogCompressor,
    _literal_trie_pattern,
    compress_log,
    mask,
    parse_filter_rules,
    strip_prefix,
)


@pytest.fixture(scope="module")
def corpus_lines() -> list[str]:
    return real_corpus_lines()


def _output(compressed) -> dict:
    out = compressed.to_dict()
    out["stats"].pop("seconds")
    return out


def test_remembering_verdicts_changes_no_kept_line_on_the_real_corpus_logs(corpus_lines):
    assert len(corpus_lines) > 90_000
    remembered = compress_log(corpus_lines)
    # max_verdict_chars=0: the memory is emptied before every new text, so each line is classified afresh.
    afresh = compress_log(corpus_lines, max_verdict_chars=0)
    assert remembered.stats["kept_errors"] > 2_000
    assert _output(remembered) == _output(afresh)


def test_a_remembered_line_follows_the_rule_order_when_it_changes():
    rules = parse_filter_rules(
        {
            "rules": [
                {"id": "warn", "regex": "WARN", "description": "warnings", "version": 1, "keep_first": 1},
                {"id": "noisy", "regex": "noisy", "description": "noise", "version": 1},
            ]
        }
    )
    both = "WARN noisy thing"  # matches both rules: the first one in the current order decides
    lines = [both] + [f"noisy {i}" for i in range(5_000)] + [both, both]
    compressed = compress_log(lines, rules)
    # Line 1: "warn" is tried first and keeps it (keep_first 1). Line 4096 re-sorts the rules by hits, so later
    # copies are dropped by "noisy" -- a verdict remembering "warn" would have counted them under "warn".
    assert compressed.stats["dropped_by_rule"] == {"warn": 0, "noisy": 5_002}
    assert [k.text for k in compressed.lines] == [both]
    assert _output(compressed) == _output(compress_log(lines, rules, max_verdict_chars=0))


def test_the_verdict_memory_is_bounded():
    compressor = LogCompressor(max_verdict_chars=10_000)
    for number in range(1, 20_001):
        compressor.feed(number, f"[rank{number % 8}]: distinct routine message number {number}")
    held = sum(map(len, compressor._stripped)) + sum(map(len, compressor._verdicts))
    assert held <= 10_000 + compressor.max_line_chars
    assert compressor.result().stats["lines_in"] == 20_000


def test_the_trigger_trie_finds_a_trigger_exactly_where_a_substring_test_does(corpus_lines):
    samples = [line.lower() for line in corpus_lines]
    samples += [f"x{trigger}y" for trigger in _ERROR_TRIGGERS] + [trigger[:-1] for trigger in _ERROR_TRIGGERS]
    found = [_ERROR_TRIGGER_RE.search(low) is not None for low in samples]
    assert found == [any(trigger in low for trigger in _ERROR_TRIGGERS) for low in samples]
    assert 1_000 < sum(found) < len(samples)


def test_a_literal_trie_shares_prefixes_and_stops_at_the_shortest_word():
    pattern = _literal_trie_pattern(["error", "errno", "err", "x.y"])
    assert pattern == r"(?:err|x\.y)"
    assert _literal_trie_pattern(["errno", "error"]) == "err(?:no|or)"
    assert re.search(_literal_trie_pattern(["errno", "error"]), "an errno 28") is not None


def test_the_mask_lookahead_changes_no_masked_line(corpus_lines):
    without_lookahead = re.compile(_MASK_RE.pattern.replace("(?=[-+0-9a-f/])", "", 1), re.VERBOSE)
    assert without_lookahead.pattern != _MASK_RE.pattern
    for line in corpus_lines[::3]:
        bare = strip_prefix(line)[0]
        expected = without_lookahead.sub(lambda m: "<" + (m.lastgroup or "x").upper() + ">", bare)
        assert mask(bare) == expected, line
