"""The evaluation suite: which datasets one evaluation of a checkpoint runs, and how big each is.

A suite is a CSV file, one row per dataset::

    dataset,n_samples,metric_kind[,gpu_s_per_sample][,cpu_s_per_sample][,n_choices]

- ``n_samples``: samples of the split that is scored (MMLU's test split: 14042).
- ``metric_kind``: how the answer is scored, which decides where the metric time goes:
  ``match`` (exact match, regex or ROUGE on generated text: cheap CPU), ``code_exec`` (generated
  programs run against unit tests: HumanEval, MBPP; heavy CPU), ``judge`` (a judge model grades
  each answer: slow, I/O bound), ``ppl`` (loglikelihood of each answer option: the GPU does the
  scoring, the metric is an argmax). Common aliases are accepted (``code``, ``code_execution``,
  ``llm_judge``, ``loglikelihood``…) and so are OpenCompass's own words: ``gen`` is ``code_exec``
  for a code dataset (HumanEval, MBPP, DS-1000…) and ``match`` otherwise; ``ppl``, ``ll`` and
  ``clp`` are ``ppl``. A blank kind is inferred from an OpenCompass config name
  (``gsm8k_gen_1d7fe4``, ``hellaswag_ppl``, ``winogrande_ll``, ``alignbench_llmjudge``) and the
  suite's warnings say so. A kind that is neither known nor inferable refuses the file with the
  list of valid kinds: a kind is never changed silently (it decides where the metric time goes).
- ``gpu_s_per_sample`` / ``cpu_s_per_sample`` (optional): runtime priors for this dataset, GPU
  seconds of inference per sample for the 7B reference model and CPU seconds of metric per sample;
  blank means "use the prior of the metric kind" (``acme.evaluation.priors``).
- ``n_choices`` (optional): answer options per sample of a ``ppl`` dataset (a loglikelihood
  evaluation scores every option, so its cost grows with the count).

Lines starting with ``#`` are comments. The planner must be able to run on whatever the suite
owner wrote, so imperfect rows are repaired or dropped with a warning instead of failing the run:

| row problem | handling |
|---|---|
| ``n_samples`` blank / ``?`` / ``unknown`` / not a number | ``DEFAULT_N_SAMPLES`` (1000), warning |
| ``metric_kind`` blank | inferred from an OpenCompass config name, warning; not inferable: ``InputError`` listing the valid kinds |
| ``metric_kind`` unknown | ``InputError`` naming the file, line and kind, listing the valid kinds |
| ``dataset`` blank | row dropped, warning |
| ``n_samples`` zero or negative | row dropped, warning (nothing, or nonsense, to evaluate) |
| ``dataset`` repeated | later row dropped, warning |
| more fields than the header | row dropped, warning (a comma inside a name shifts every column) |
| optional number not a number or negative | treated as blank, warning |

Warnings are returned in ``Suite.warnings`` (each names the file and line), never printed. A file
that cannot be used at all (missing, unreadable, not UTF-8, no header, a required column absent,
no usable row) raises ``InputError`` naming the file and, where there is one, the line.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from acme.errors import InputError

METRIC_KINDS = ("match", "code_exec", "judge", "ppl")
DEFAULT_N_SAMPLES = 1000
REQUIRED_COLUMNS = ("dataset", "n_samples")
OPTIONAL_COLUMNS = ("metric_kind", "gpu_s_per_sample", "cpu_s_per_sample", "n_choices")

# "gen" (generation) is resolved with the dataset's name: code datasets are scored by execution.
GENERATION = "gen"
_KIND_ALIASES = {
    "match": "match",
    "gen": GENERATION,
    "generation": GENERATION,
    "generate": GENERATION,
    "exact_match": "match",
    "em": "match",
    "regex": "match",
    "rouge": "match",
    "code_exec": "code_exec",
    "code": "code_exec",
    "exec": "code_exec",
    "execution": "code_exec",
    "code_execution": "code_exec",
    "code_eval": "code_exec",
    "unit_test": "code_exec",
    "pass@k": "code_exec",
    "pass@1": "code_exec",
    "judge": "judge",
    "llm_judge": "judge",
    "model_judge": "judge",
    "gpt4_judge": "judge",
    "llmjudge": "judge",
    "subjective": "judge",
    "ppl": "ppl",
    "perplexity": "ppl",
    "loglikelihood": "ppl",
    "log_likelihood": "ppl",
    "ll": "ppl",
    "clp": "ppl",
    "mc": "ppl",
    "multiple_choice": "ppl",
}
_UNKNOWN_SIZE = {"", "?", "unknown", "na", "n/a", "none", "null"}


@dataclass(frozen=True)
class EvalDataset:
    """One dataset of a suite, with the runtime hints its row gave (None: use the kind's prior)."""

    name: str
    n_samples: int
    metric_kind: str
    gpu_s_per_sample: float | None = None
    cpu_s_per_sample: float | None = None
    n_choices: int | None = None

    def __post_init__(self) -> None:
        if self.metric_kind not in METRIC_KINDS:
            raise ValueError(f"metric_kind {self.metric_kind!r} is not one of {METRIC_KINDS}")
        if self.n_samples <= 0:
            raise ValueError(f"{self.name}: n_samples must be positive, got {self.n_samples}")


@dataclass
class Suite:
    """The datasets of one evaluation, in submission order, and what was repaired while reading."""

    datasets: list[EvalDataset]
    source: str = "<memory>"
    warnings: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.datasets)

    def by_name(self) -> dict[str, EvalDataset]:
        return {d.name: d for d in self.datasets}

    @property
    def total_samples(self) -> int:
        return sum(d.n_samples for d in self.datasets)


# OpenCompass config names: <dataset>_<mode>[_<6 hex of the prompt hash>] (gsm8k_gen_1d7fe4).
_CONFIG_NAME = re.compile(r"^(?P<base>.+?)_(?P<mode>gen|ppl|ll|clp|llmjudge|judge)(?:_[0-9a-f]{6})?$", re.I)
# Datasets OpenCompass scores by running the generated code.
CODE_DATASETS = (
    "humaneval", "humanevalx", "humaneval_plus", "humaneval_cn", "mbpp", "mbpp_plus", "sanitized_mbpp",
    "mbpp_cn", "ds1000", "apps", "taco", "livecodebench", "lcbench", "codecontests", "multipl_e", "bigcodebench",
)  # fmt: skip


def normalize_metric_kind(text: str | None, dataset: str = "") -> str | None:
    """The canonical metric kind for ``text`` (case, spelling and aliases folded), or None if unknown.

    ``gen`` needs the dataset: code datasets are ``code_exec``, the others ``match``.
    """
    if text is None:
        return None
    kind = _KIND_ALIASES.get(text.strip().lower().replace("-", "_").replace(" ", "_"))
    if kind == GENERATION:
        return "code_exec" if is_code_dataset(dataset) else "match"
    return kind


def is_code_dataset(name: str) -> bool:
    """True for a dataset OpenCompass scores by execution (HumanEval, MBPP…), by base name."""
    match = _CONFIG_NAME.match(name.strip())
    base = (match.group("base") if match else name).strip().lower().replace("-", "_")
    return any(base == code or base.startswith(code + "_") for code in CODE_DATASETS)


def infer_metric_kind(dataset: str) -> str | None:
    """The kind an OpenCompass config name states (``mmlu_ppl`` → ``ppl``), or None."""
    match = _CONFIG_NAME.match(dataset.strip())
    return normalize_metric_kind(match.group("mode"), dataset) if match else None


def _kind_refusal(where: str, name: str, what: str) -> InputError:
    source, _, line = where.rpartition(":")
    return InputError(
        source,
        f"{name}: {what}; valid kinds: {', '.join(METRIC_KINDS)} (or OpenCompass's gen, ppl, ll, "
        "code_execution, llm_judge…; a blank kind is inferred from a name like gsm8k_gen or mmlu_ppl)",
        line=int(line) if line.isdigit() else None,
    )


def read_suite(path: str | Path) -> Suite:
    """Read a suite CSV; imperfect rows are repaired or dropped with a warning (see module doc)."""
    source = str(path)
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(source, f"cannot read the suite file ({exc.strerror or exc})") from None
    except ValueError as exc:  # a NUL byte in the path (a suite Param is any text)
        raise InputError(repr(source), f"not a file path ({exc})") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(source, f"not UTF-8 text (byte {exc.start})") from None
    return parse_suite(text, source=source)


def _header(lines: list[str], source: str, warnings: list[str]) -> tuple[int, list[str]]:
    """Index and lower-cased columns of the first line that is neither blank nor a comment."""
    header_index = next(
        (i for i, line in enumerate(lines) if line.strip() and not line.lstrip().startswith("#")), None
    )
    if header_index is None:
        raise InputError(source, "empty suite: no header line")
    try:
        header = [h.strip().lower() for h in next(csv.reader([lines[header_index]]))]
    except csv.Error as exc:
        raise InputError(source, f"header cannot be read as CSV ({exc})", line=header_index + 1) from None
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise InputError(
            source,
            f"header lacks required column(s) {', '.join(missing)} (found: {', '.join(header)})",
            line=header_index + 1,
        )
    unknown = [h for h in header if h not in REQUIRED_COLUMNS + OPTIONAL_COLUMNS]
    if unknown:
        warnings.append(f"{source}:{header_index + 1}: ignoring unknown column(s) {', '.join(unknown)}")
    return header_index, header


def _metric_kind(raw_kind: str, name: str, where: str, warnings: list[str]) -> str:
    """The row's metric kind: the stated one (a warning when the name says another) or the name's."""
    if raw_kind:
        kind = normalize_metric_kind(raw_kind, name)
        if kind is None:
            raise _kind_refusal(where, name, f"unknown metric_kind {raw_kind!r}")
        stated = infer_metric_kind(name)
        if stated is not None and stated != kind:
            warnings.append(
                f"{where}: {name}: metric_kind {raw_kind!r} ({kind}) kept; the name says {stated}"
            )
        return kind
    inferred = infer_metric_kind(name)
    if inferred is None:
        raise _kind_refusal(where, name, "no metric_kind, and the name states none (like _gen or _ppl)")
    warnings.append(f"{where}: {name}: no metric_kind; inferred {inferred!r} from the name")
    return inferred


def _n_choices(raw: str, where: str, name: str, warnings: list[str]) -> int | None:
    choices = _parse_optional_number(raw, "n_choices", where, name, warnings)
    if choices is None:
        return None
    if choices < 1 or choices != int(choices):
        warnings.append(f"{where}: {name}: n_choices {choices:g} is not a positive integer; ignored")
        return None
    return int(choices)


def parse_suite(text: str, source: str = "<memory>") -> Suite:
    """Parse suite CSV text (``source`` names it in warnings and errors)."""
    # Only "\n" (or "\r\n") ends a line: str.splitlines() would also split a row at U+2028, \x85 or
    # \x1e inside a name, cutting it in two and shifting every later line number.
    lines = [line.removesuffix("\r") for line in text.removeprefix("\ufeff").split("\n")]
    warnings: list[str] = []
    header_index, header = _header(lines, source, warnings)
    column = {name: header.index(name) for name in header if name}

    datasets: list[EvalDataset] = []
    seen: dict[str, int] = {}
    for line, fields in _records(lines, header_index + 1, source, warnings):
        if not fields or all(not f.strip() for f in fields) or fields[0].lstrip().startswith("#"):
            continue
        where = f"{source}:{line}"
        if len(fields) > len(header):
            warnings.append(
                f"{where}: {len(fields)} fields for {len(header)} columns (a comma in a name?); row dropped"
            )
            continue

        def value(name: str, fields: list[str] = fields) -> str:
            index = column.get(name)
            return fields[index].strip() if index is not None and index < len(fields) else ""

        name = value("dataset")
        if not name:
            warnings.append(f"{where}: no dataset name; row dropped")
            continue
        if name in seen:
            warnings.append(f"{where}: dataset {name!r} already listed on line {seen[name]}; row dropped")
            continue
        n_samples = _parse_size(value("n_samples"), where, name, warnings)
        if n_samples is None:
            continue
        kind = _metric_kind(value("metric_kind"), name, where, warnings)
        gpu = _parse_optional_number(value("gpu_s_per_sample"), "gpu_s_per_sample", where, name, warnings)
        cpu = _parse_optional_number(value("cpu_s_per_sample"), "cpu_s_per_sample", where, name, warnings)
        n_choices = _n_choices(value("n_choices"), where, name, warnings)
        seen[name] = line
        datasets.append(EvalDataset(name, n_samples, kind, gpu, cpu, n_choices))
    if not datasets:
        raise InputError(source, "no usable dataset row")
    return Suite(datasets=datasets, source=source, warnings=warnings)


def _records(
    lines: list[str], first: int, source: str, warnings: list[str]
) -> Iterator[tuple[int, list[str]]]:
    """The CSV records of ``lines[first:]`` with the file line each starts on (a quoted field may span
    lines); a line the csv module refuses (a bare carriage return, a field over its size limit) is
    dropped with a warning."""
    reader = csv.reader(line + "\n" for line in lines[first:])
    read = 0
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            if lines[first + read].lstrip().startswith("#"):  # a comment (too long to parse) is no row
                read = reader.line_num
                continue
            problem = "a carriage return inside an unquoted field" if "new-line" in str(exc) else str(exc)
            warnings.append(f"{source}:{first + read + 1}: cannot be read as CSV ({problem}); row dropped")
            read = reader.line_num
            continue
        yield first + read + 1, fields
        read = reader.line_num


def _parse_size(text: str, where: str, name: str, warnings: list[str]) -> int | None:
    """Samples of a row: a positive integer, the default for an unknown size, None to drop the row."""
    if text.lower() in _UNKNOWN_SIZE:
        warnings.append(f"{where}: {name}: size unknown; assuming {DEFAULT_N_SAMPLES} samples")
        return DEFAULT_N_SAMPLES
    try:
        number = float(text.replace("_", ""))
    except ValueError:
        warnings.append(f"{where}: {name}: n_samples {text!r} is not a number; assuming {DEFAULT_N_SAMPLES}")
        return DEFAULT_N_SAMPLES
    if not math.isfinite(number):
        warnings.append(f"{where}: {name}: n_samples {text!r} is not finite; assuming {DEFAULT_N_SAMPLES}")
        return DEFAULT_N_SAMPLES
    if number <= 0:
        warnings.append(f"{where}: {name}: n_samples {text} is not positive; row dropped")
        return None
    if number != int(number):
        rounded = max(1, round(number))
        warnings.append(f"{where}: {name}: n_samples {text} is not whole; using {rounded}")
        return rounded
    return int(number)


def _parse_optional_number(
    text: str, column: str, where: str, name: str, warnings: list[str]
) -> float | None:
    if not text:
        return None
    try:
        number = float(text)
    except ValueError:
        warnings.append(f"{where}: {name}: {column} {text!r} is not a number; ignored")
        return None
    if not math.isfinite(number) or number < 0:
        warnings.append(f"{where}: {name}: {column} {text} is negative or not finite; ignored")
        return None
    return number


def default_suite_path() -> Path:
    """The bundled ~60-dataset suite (``include/eval/default_suite.csv``)."""
    from acme import settings

    return settings.project().include_dir / "eval" / "default_suite.csv"


def load_default_suite() -> Suite:
    return read_suite(default_suite_path())
