"""What a model offers the code that runs it: ``generate`` and ``loglikelihood`` over batches, with a
count of the tokens it read and wrote (see ``acme.models``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class Generation:
    """One completion: its text (cut at the stop string), and the tokens read and written."""

    text: str
    prompt_tokens: int
    completion_tokens: int


@dataclass
class TokenCounter:
    """Tokens a model read (prompt, scored continuations) and wrote, and the seconds it took."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    calls: int = 0

    def add(self, prompt_tokens: int, completion_tokens: int, seconds: float) -> None:
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens
        self.seconds += seconds
        self.calls += 1

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class Model(Protocol):
    """What a trial (or any caller) needs from its model (see ``acme.models``)."""

    backend: str
    counter: TokenCounter

    @property
    def description(self) -> str: ...

    def generate(self, prompts: Sequence[str], max_tokens: int, stop: Sequence[str]) -> list[Generation]: ...

    def loglikelihood(self, requests: Sequence[tuple[str, str]]) -> list[float]: ...

    def close(self) -> None: ...


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """``text`` up to the first stop string (servers differ in whether they cut it themselves)."""
    cut = len(text)
    for s in stop:
        if s:
            found = text.find(s)
            if found != -1:
                cut = min(cut, found)
    return text[:cut]


def continuation_start(context_tokens: list[int], whole: list[int]) -> int:
    """Index in ``whole`` where the continuation's tokens begin (at least 1: a token to condition on).

    Tokenizers merge across the boundary (``" Paris"`` is one token): the continuation starts after
    the longest common prefix of the context's tokens and the whole text's tokens.
    """
    common = 0
    for a, b in zip(context_tokens, whole, strict=False):
        if a != b:
            break
        common += 1
    return max(1, min(common, len(whole) - 1))
