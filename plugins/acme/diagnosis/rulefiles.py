"""Reading the YAML rule files of the diagnosis (filter rules, diagnosis rules), cached per version."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from acme.errors import ConfigError

Rules = TypeVar("Rules")

_CACHE: dict[tuple[str, Path], tuple[float, Any]] = {}


def load_rule_file(path: Path, parse: Callable[[Any, str], Rules], what: str) -> Rules:
    """Parse ``path`` with ``parse`` once per modification time; problems raise ConfigError naming the file."""
    try:
        mtime = path.stat().st_mtime
    except OSError as exc:
        raise ConfigError(f"{what} {path} cannot be read: {exc}") from exc
    cached = _CACHE.get((what, path))
    if cached and cached[0] == mtime:
        return cached[1]
    import yaml

    try:
        # yaml.safe_load's loading with libyaml's safe loader when built in (~10x faster: seconds of a
        # crash's diagnosis); what yaml.safe_load does, with CSafeLoader in place of SafeLoader.
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(path.read_text(encoding="utf-8"))
        try:
            document = loader.get_single_data()
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        raise ConfigError(f"{what} {path} is not valid YAML: {exc}") from exc
    rules = parse(document, str(path))
    _CACHE[(what, path)] = (mtime, rules)
    return rules
