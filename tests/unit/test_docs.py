"""The README and the pages under docs/ stay true to the repository: every relative link reaches a file
(and, with an anchor, a heading of it), every repository path they name exists, and every command they
show names a real Makefile target, `python -m acme` command and option, script, module, DAG or test path.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from acme.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", ROOT / "benchmarks" / "README.md", *(ROOT / "docs").glob("*.md")])
# Top-level folders and files of the repository: a backticked path starting with one is a claim
# that the path exists (lake keys such as `diagnosis/messages/` start otherwise and are not checked).
REPO_ROOTS = ("dags/", "plugins/", "include/", "tests/", "benchmarks/", "docs/", "scripts/", "stack/", ".ci/")
REPO_FILES = {
    "Makefile",
    "Dockerfile",
    "docker-compose.yaml",
    "requirements.txt",
    "constraints.txt",
    ".env.example",
    "pyproject.toml",
    "vulture_whitelist.py",
}
# What the project writes when it runs (git-ignored): named in the docs, absent from a fresh clone.
GENERATED = tuple(
    line.strip()
    for line in (ROOT / ".gitignore").read_text().splitlines()
    if line.strip().endswith("/") and not line.startswith("#")
)
PLACEHOLDER = re.compile(r"[<>{}*…|$\[\]]|\.\.\.")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    return {slug(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}


def make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([A-Za-z][\w-]*)\s*:(?!=)", text, re.M))
    for phony in re.findall(r"^\.PHONY:(.*)$", text, re.M):
        targets.update(phony.split())
    return targets


def dag_ids() -> set[str]:
    return {
        match
        for path in (ROOT / "dags").glob("*.py")
        for match in re.findall(r'dag_id="([\w.-]+)"', path.read_text())
    }


def acme_commands() -> dict[str, set[str]]:
    """Each `python -m acme` command with the option strings it takes."""
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command")
    return {
        name: {opt for action in sub._actions for opt in action.option_strings}
        for name, sub in commands.choices.items()
    }


def commands_of(page: Path) -> list[str]:
    """The command lines a page shows: every line of a bash/sh/console block, and inline code that
    starts with a command this test knows how to check."""
    text = page.read_text()
    found = []
    for language, body in FENCE.findall(text):
        if language not in ("bash", "sh", "shell", "console"):
            continue
        joined = re.sub(r"\\\n\s*", " ", body)
        found.extend(line.strip() for line in joined.splitlines() if line.strip())
    for span in CODE_SPAN.findall(FENCE.sub("", text)):
        if re.match(r"(\S+=\S+\s+)*(make |\.venv/bin/|python )", span):
            found.append(span)
    return found


def problems_of_command(line: str, targets: set[str], dags: set[str], acme: dict[str, set[str]]) -> list[str]:
    line = line.split(" #", 1)[0].strip().rstrip("&").strip()
    if not line or line.startswith("#"):
        return []
    try:
        words = shlex.split(line)
    except ValueError:
        return []
    problems = []
    for part in " ".join(words).split(" && "):
        # JSON arguments (a run's conf) are values, not names to check; a redirect ends the command.
        tokens = [
            t.strip("[]") for t in part.split(" > ")[0].split() if t.strip("[]") and not t.startswith("{")
        ]
        while tokens and re.match(r"^[A-Z_][A-Z0-9_]*=", tokens[0]):
            tokens = tokens[1:]
        if not tokens or any(re.search(r"[<>…]|\.\.\.", t) for t in tokens):
            continue  # a template with placeholders, not a command
        problems.extend(_problems_of_tokens(tokens, targets, dags, acme))
    return problems


def _problems_of_tokens(tokens, targets, dags, acme) -> list[str]:
    program, args = tokens[0], tokens[1:]
    if program == "make":
        return [f"no Makefile target {t!r}" for t in args if "=" not in t and t not in targets]
    if program.endswith("python") or program.endswith("python3"):
        return _problems_of_python(args, acme)
    if program.endswith("/airflow") and args[:2] == ["dags", "test"] and len(args) > 2:
        return [] if args[2] in dags else [f"no DAG {args[2]!r}"]
    if re.match(r"^(\./)?(scripts|stack|benchmarks|\.ci)/", program):
        return [] if (ROOT / program).exists() else [f"no script {program}"]
    return []


def _problems_of_python(args: list[str], acme: dict[str, set[str]]) -> list[str]:
    if args[:2] == ["-m", "acme"] and len(args) > 2 and not args[2].startswith("-"):
        name = args[2]
        if name not in acme:
            return [f"no `python -m acme` command {name!r}"]
        options = {a.split("=", 1)[0] for a in args[3:] if a.startswith("--")}
        return [f"`acme {name}` has no option {o}" for o in sorted(options - acme[name] - {"--help"})]
    if args[:1] == ["-m"] and len(args) > 1:
        module = args[1]
        if module in ("pytest", "acme", "pip", "venv"):
            return [p for p in args[2:] if p.startswith("tests/") and not (ROOT / p.split("::")[0]).exists()]
        path = ROOT / "plugins" / Path(*module.split("."))
        return (
            []
            if path.with_suffix(".py").exists() or (path / "__main__.py").exists()
            else [f"no module {module}"]
        )
    if args and args[0].endswith(".py"):
        return [] if (ROOT / args[0]).exists() else [f"no script {args[0]}"]
    return []


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_relative_link_reaches_a_file_and_heading(page):
    broken = []
    for target in LINK.findall(FENCE.sub("", page.read_text())):
        if re.match(r"^[a-z]+:", target):
            continue
        path_part, _, anchor = target.partition("#")
        linked = (page.parent / path_part).resolve() if path_part else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no heading #{anchor}")
    assert not broken, f"{page_id(page)}: {broken}"


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_repository_path_named_exists(page):
    missing = []
    for span in CODE_SPAN.findall(page.read_text()):
        for word in span.split():
            word = word.strip("(),;:'\"").split("::")[0]
            if PLACEHOLDER.search(word) or "=" in word:
                continue
            candidate = word[len("./") :] if word.startswith("./") else word
            if candidate.startswith("acme/"):
                candidate = "plugins/" + candidate
            if candidate.startswith(GENERATED):
                continue
            named = candidate.startswith(REPO_ROOTS) or candidate in REPO_FILES
            if named and not (ROOT / candidate.rstrip("/")).exists():
                missing.append(word)
    assert not missing, f"{page_id(page)} names paths that do not exist: {sorted(set(missing))}"


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_command_shown_is_real(page):
    targets, dags, acme = make_targets(), dag_ids(), acme_commands()
    problems = [
        f"{line!r}: {problem}"
        for line in commands_of(page)
        for problem in problems_of_command(line, targets, dags, acme)
    ]
    assert not problems, f"{page_id(page)}: " + "; ".join(problems)


def test_the_checks_catch_what_they_are_for(tmp_path):
    """The three checks fail on a page with a dead link, a missing path and a false command."""
    targets, dags, acme = make_targets(), dag_ids(), acme_commands()
    assert problems_of_command("make no-such-target", targets, dags, acme)
    assert problems_of_command(".venv/bin/python -m acme ingest-jobs --no-such-flag x", targets, dags, acme)
    assert problems_of_command(".venv/bin/python -m acme no-such-command", targets, dags, acme)
    assert problems_of_command(".venv/bin/airflow dags test no_such_dag 2023-07-01", targets, dags, acme)
    assert problems_of_command("python benchmarks/no_such_bench.py", targets, dags, acme)
    assert not problems_of_command("PYTEST_ARGS='-m slow' make test", targets, dags, acme)
    assert not problems_of_command(
        ".venv/bin/python -m acme report --lake DIR --cluster seren", targets, dags, acme
    )
    assert (
        slug("The nightly job-trace DAG (`ingest_job_traces`)")
        == "the-nightly-job-trace-dag-ingest_job_traces"
    )


# A line git writes into a file when a merge conflicts; a committed one means a merge was not finished
# (the README once held both sides of its docs/ row). Real logs under tests/fixtures/ may quote them.
CONFLICT_MARKER = re.compile(r"^(<{7} |>{7} |={7}$)", re.M)


def test_no_page_or_source_file_holds_a_merge_conflict_marker():
    checked = [
        *PAGES,
        *(
            p
            for folder in ("dags", "plugins", "include", "stack", "scripts")
            for p in (ROOT / folder).rglob("*")
        ),
        *(ROOT / name for name in REPO_FILES),
    ]
    texts = [
        p
        for p in checked
        if p.is_file()
        and p.suffix in {"", ".md", ".py", ".sql", ".yaml", ".yml", ".txt", ".toml", ".sh", ".cfg"}
    ]
    assert len(texts) > 50
    marked = [
        str(p.relative_to(ROOT)) for p in texts if CONFLICT_MARKER.search(p.read_text(errors="replace"))
    ]
    assert marked == []
