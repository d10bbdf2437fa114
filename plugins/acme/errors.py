"""Specific errors. Each names the input and what was wrong with it."""

from __future__ import annotations


class AcmeError(Exception):
    """Base class for errors the pipeline raises on purpose."""


class InputError(AcmeError):
    """An input file or stream cannot be used at all (empty, wrong format, unreadable)."""

    def __init__(self, source: str, problem: str, line: int | None = None):
        self.source = source
        self.problem = problem
        self.line = line
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {problem}")


class InputNotFoundError(AcmeError):
    """An input is not there (yet): unlike a bad input, a retry later may find it, so Airflow retries it."""

    def __init__(self, source: str, problem: str):
        self.source = source
        self.problem = problem
        super().__init__(f"{source}: {problem}")


class SchemaDriftError(InputError):
    """The input's columns differ from the schema its format promises."""


class QuarantineThresholdError(AcmeError):
    """Too many rows of one input failed validation for its partition to be published."""


class ConfigError(AcmeError):
    """A configuration value is missing or invalid."""
