"""Safety checks for regular expressions written by a language model before they become rules.

A regex proposed by an LLM (a diagnosis signature or a log filter rule) runs later over every line of every
log. One with nested quantifiers such as ``(a+)+$`` backtracks exponentially on a near-miss line and stalls
the whole diagnosis run (ReDoS); one that matches the empty string matches every line. Such regexes are
refused here, before they are ever run on a log.

The check walks the parse tree of Python's own regex parser (``re._parser``, the module behind ``re``), so
it judges the pattern exactly as ``re`` will compile it rather than guessing from its text.
"""

from __future__ import annotations

import re
from typing import Any

try:  # Python 3.11+: the parser behind ``re`` (sre_parse is its deprecated alias).
    import re._constants as _sre_constants
    import re._parser as _sre_parse
except ImportError:  # pragma: no cover - older interpreters
    import sre_constants as _sre_constants  # type: ignore[no-redef]
    import sre_parse as _sre_parse  # type: ignore[no-redef]

MAX_REGEX_CHARS = 300

_REPEATS = {
    _sre_constants.MAX_REPEAT,
    _sre_constants.MIN_REPEAT,
    *([_sre_constants.POSSESSIVE_REPEAT] if hasattr(_sre_constants, "POSSESSIVE_REPEAT") else []),
}
_BACKREFERENCES = {
    _sre_constants.GROUPREF,
    _sre_constants.GROUPREF_EXISTS,
    *([_sre_constants.GROUPREF_IGNORE] if hasattr(_sre_constants, "GROUPREF_IGNORE") else []),
}


def _children(av: Any) -> list[Any]:
    """The sub-patterns nested in one node's argument (groups, repeats, branches, lookarounds)."""
    found: list[Any] = []
    stack = [av]
    while stack:
        item = stack.pop()
        if isinstance(item, _sre_parse.SubPattern):
            found.append(item)
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return found


def _contains_repeat(subpattern: Any) -> bool:
    for op, av in subpattern:
        if op in _REPEATS and av[1] > 1:
            return True
        if any(_contains_repeat(child) for child in _children(av)):
            return True
    return False


def _problem_in(subpattern: Any) -> str | None:
    for op, av in subpattern:
        if op in _BACKREFERENCES:
            return "uses a backreference"
        if op in _REPEATS and av[1] > 1 and any(_contains_repeat(c) for c in _children(av[2])):
            return "has nested quantifiers (a repeated group containing a repeat), which can backtrack exponentially"
        for child in _children(av):
            problem = _problem_in(child)
            if problem:
                return problem
    return None


def regex_problem(pattern: Any, *, max_chars: int = MAX_REGEX_CHARS) -> str | None:
    """Why ``pattern`` cannot be used as a rule (None when it can): type, length, syntax, ReDoS shape."""
    if not isinstance(pattern, str) or not pattern.strip():
        return "is not a non-empty string"
    if len(pattern) > max_chars:
        return f"is {len(pattern)} characters long (at most {max_chars})"
    try:
        compiled = re.compile(pattern)
        tree = _sre_parse.parse(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        return f"does not compile: {exc}"
    problem = _problem_in(tree)
    if problem:
        return problem
    if compiled.search("") is not None:
        return "matches the empty string, so it would match every line"
    return None
