"""Job-type classification by configurable rules, for sources that carry no type.

The rules live in ``include/config/job_types.yaml`` (see there for the defaults and why);
``ACME_JOB_TYPE_RULES`` points at another file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from acme.errors import ConfigError
from acme.jobs.schema import JOB_TYPES


@dataclass(frozen=True)
class JobTypeRule:
    job_type: str
    name: re.Pattern[str] | None = None
    partition: re.Pattern[str] | None = None
    label_key: str | None = None
    label_value: re.Pattern[str] | None = None
    gpus: str | None = None  # "zero" | "positive"

    def matches(self, name: str, partition: str, labels: dict[str, str], gpu_num: int) -> bool:
        if self.gpus == "zero" and gpu_num != 0:
            return False
        if self.gpus == "positive" and gpu_num <= 0:
            return False
        if self.name is not None and not self.name.search(name or ""):
            return False
        if self.partition is not None and not self.partition.search(partition or ""):
            return False
        if self.label_key is not None:
            value = labels.get(self.label_key)
            if value is None or self.label_value is None or not self.label_value.fullmatch(value):
                return False
        return True


class JobTypeClassifier:
    def __init__(self, rules: list[JobTypeRule]):
        if not rules:
            raise ConfigError("job-type rules: the list is empty")
        self.rules = rules

    def classify(
        self,
        name: str | None,
        partition: str | None = None,
        labels: dict[str, str] | None = None,
        gpu_num: int = 0,
    ) -> str:
        for rule in self.rules:
            if rule.matches(name or "", partition or "", labels or {}, gpu_num):
                return rule.job_type
        return "CPU" if gpu_num == 0 else "Other"

    @classmethod
    def from_yaml(cls, path: Path) -> JobTypeClassifier:
        import yaml

        try:
            document = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"job-type rules {path}: cannot read: {exc}") from exc
        rules = []
        for index, spec in enumerate((document or {}).get("rules") or []):
            rules.append(_rule_from_spec(spec, f"{path} rule {index + 1}"))
        return cls(rules)


def _rule_from_spec(spec: dict, where: str) -> JobTypeRule:
    job_type = spec.get("job_type")
    if job_type not in JOB_TYPES:
        raise ConfigError(f"{where}: job_type {job_type!r} is not one of {', '.join(JOB_TYPES)}")
    unknown = set(spec) - {"job_type", "name", "partition", "label", "gpus"}
    if unknown:
        raise ConfigError(f"{where}: unknown keys {sorted(unknown)}")
    try:
        name = re.compile(spec["name"], re.IGNORECASE) if "name" in spec else None
        partition = re.compile(spec["partition"], re.IGNORECASE) if "partition" in spec else None
        label_key = label_value = None
        if "label" in spec:
            label_key, sep, pattern = str(spec["label"]).partition("=")
            if not sep:
                raise ConfigError(f"{where}: label must be 'key=regex', got {spec['label']!r}")
            label_value = re.compile(pattern)
    except re.error as exc:
        raise ConfigError(f"{where}: bad regex: {exc}") from exc
    gpus = spec.get("gpus")
    if gpus not in (None, "zero", "positive"):
        raise ConfigError(f"{where}: gpus must be 'zero' or 'positive', got {gpus!r}")
    return JobTypeRule(job_type, name, partition, label_key, label_value, gpus)


@lru_cache(maxsize=4)
def load_classifier(path: str | None = None) -> JobTypeClassifier:
    """The configured classifier (``ACME_JOB_TYPE_RULES`` or the bundled default)."""
    from acme import settings

    return JobTypeClassifier.from_yaml(Path(path or settings.jobs().job_type_rules))
