"""Reading text inputs in bounded memory, for every area that reads files operators hand over:
scheduler exports (``acme.jobs``), exporter scrapes (``acme.metrics``) and training logs
(``acme.diagnosis``). Lines are split without decoding and without ever holding a line above the
limit whole; an input above ``ACME_MAX_INPUT_BYTES`` is refused before it is read.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import IO, NamedTuple

from acme.errors import InputError

CHUNK_BYTES = 8 * 1024 * 1024  # read this much of a file at a time
MAX_LINE_BYTES = 1024 * 1024  # a longer line is rejected (its first bytes kept), never held whole
LONG_LINE_HEAD_BYTES = 1024  # what is kept of a line above the limit, for the reject's record


def max_input_bytes() -> int:
    """Largest input a parser that holds its input whole accepts (``ACME_MAX_INPUT_BYTES``, 1 GiB)."""
    from acme import settings

    return settings.jobs().max_input_bytes


def check_input_size(path: str | os.PathLike, source_file: str, limit: int | None = None) -> int:
    """The input's size in bytes; :class:`InputError` naming the file, its size and the limit when
    it is larger than ``limit`` (default :func:`max_input_bytes`), before anything is read."""
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        raise InputError(source_file, f"cannot read: {exc.strerror or exc}") from exc
    refuse_above_limit(size, source_file, limit)
    return size


def refuse_above_limit(size: int, source_file: str, limit: int | None = None) -> None:
    """:class:`InputError` naming the input, its size and the limit when ``size`` is above it."""
    limit = max_input_bytes() if limit is None else limit
    if size > limit:
        raise InputError(
            source_file,
            f"input is {size:,} bytes, above the limit of {limit:,} bytes (ACME_MAX_INPUT_BYTES); "
            "refused before reading: split the input or raise the limit",
        )


class RawLine(NamedTuple):
    """One physical line of an input, without its ``\\n``."""

    number: int  # 1-based
    data: bytes  # the line, or its first LONG_LINE_HEAD_BYTES when ``too_long``
    offset: int  # byte offset of the line's start in the input
    length: int  # the line's full length in bytes
    too_long: bool  # longer than the limit: only its head was kept


def iter_raw_lines(
    handle: IO[bytes], *, chunk_bytes: int = CHUNK_BYTES, max_line_bytes: int = MAX_LINE_BYTES
) -> Iterator[RawLine]:
    """The lines of a binary stream split on ``\\n`` only (as ``text.split("\\n")``, without the
    empty piece after a final newline), reading ``chunk_bytes`` at a time. Memory stays below
    ``chunk_bytes`` + ``max_line_bytes`` whatever the input: a longer line is skipped through
    and yielded with ``too_long`` and its head only. Bytes are not decoded, so a multi-byte
    character split between two reads is whole in its line."""
    number = 0
    offset = 0  # of the start of ``pending``
    pending = b""
    long_line: RawLine | None = None  # a line above the limit being skipped through
    while True:
        chunk = handle.read(chunk_bytes)
        if not chunk:
            break
        if long_line is not None:
            end = chunk.find(b"\n")
            head = long_line.data
            if len(head) < LONG_LINE_HEAD_BYTES:  # (only when the limit is below the head's size)
                head += chunk[: min(LONG_LINE_HEAD_BYTES - len(head), len(chunk) if end < 0 else end)]
            if end < 0:
                long_line = long_line._replace(data=head, length=long_line.length + len(chunk))
                continue
            yield long_line._replace(data=head, length=long_line.length + end)
            offset = long_line.offset + long_line.length + end + 1
            long_line = None
            chunk = chunk[end + 1 :]
        buffer = pending + chunk if pending else chunk
        start = 0
        while True:
            end = buffer.find(b"\n", start)
            if end < 0:
                break
            number += 1
            length = end - start
            if length > max_line_bytes:
                yield RawLine(
                    number, buffer[start : min(end, start + LONG_LINE_HEAD_BYTES)], offset, length, True
                )
            else:
                yield RawLine(number, buffer[start:end], offset, length, False)
            offset += length + 1
            start = end + 1
        pending = buffer[start:]
        if len(pending) > max_line_bytes:
            number += 1
            long_line = RawLine(number, pending[:LONG_LINE_HEAD_BYTES], offset, len(pending), True)
            pending = b""
    if long_line is not None:
        yield long_line
    elif pending:
        number += 1
        too_long = len(pending) > max_line_bytes
        yield RawLine(
            number, pending[:LONG_LINE_HEAD_BYTES] if too_long else pending, offset, len(pending), too_long
        )


def long_line_reason(length: int, kept: int, max_line_bytes: int) -> str:
    """The reject reason for a line of ``length`` bytes above the limit, ``kept`` of them kept."""
    return (
        f"line of {length:,} bytes is longer than the limit of {max_line_bytes:,} bytes; "
        f"only its first {kept:,} bytes are kept in the record"
    )
