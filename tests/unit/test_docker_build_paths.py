"""The two build paths of the Airflow image install the same thing.

``Dockerfile`` (on the official Airflow image, what operators build) and
``docker/offline/airflow.Dockerfile`` (on a debootstrapped Debian bookworm, for machines without a
registry; docker/offline/build.sh) must not drift: the same requirement and constraint files, the
same ``--no-deps`` pins as the Makefile's set-up, the same llama.cpp flags as the Makefile's, the
same Python and Airflow versions, system packages, project files and environment. Read from the
files; nothing is built here (the compose tier builds and starts the offline image).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OFFICIAL = ROOT / "Dockerfile"
OFFLINE = ROOT / "docker" / "offline" / "airflow.Dockerfile"


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined, comments dropped."""
    joined, current = [], ""
    for line in path.read_text().splitlines():
        if line.lstrip().startswith("#") or not line.strip():
            continue
        current += line.rstrip().removesuffix("\\") + " "
        if not line.rstrip().endswith("\\"):
            joined.append(current.strip())
            current = ""
    return [(text.split(None, 1)[0].upper(), text.split(None, 1)[1]) for text in joined]


def pip_installs(path: Path) -> list[list[str]]:
    """Each ``pip install`` command of the RUN lines, its arguments without --no-cache-dir."""
    found = []
    for kind, args in instructions(path):
        if kind != "RUN":
            continue
        for command in args.split("&&"):
            words = shlex.split(command)
            if words[:2] == ["pip", "install"] and "--upgrade" not in words:
                found.append([w for w in words[2:] if w != "--no-cache-dir"])
    return found


def env(path: Path) -> dict[str, str]:
    values = {}
    for kind, args in instructions(path):
        if kind == "ENV":
            for pair in shlex.split(args):
                name, _, value = pair.partition("=")
                values[name] = value
    return values


def apt_packages(path: Path) -> set[str]:
    packages = set()
    for kind, args in instructions(path):
        for command in args.split("&&") if kind == "RUN" else []:
            words = command.split()
            if words[:2] == ["apt-get", "install"]:
                packages |= {w for w in words[2:] if not w.startswith("-")}
    return packages


def copies(path: Path) -> list[str]:
    return [
        args
        for kind, args in instructions(path)
        if kind == "COPY" and "wheels" not in args and "entrypoint" not in args
    ]


def makefile_variable(name: str) -> str:
    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    match = re.search(rf"^{name}\s*:=\s*(.+)$", text, flags=re.MULTILINE)
    assert match, f"Makefile has no {name}"
    return " ".join(match.group(1).split())


def makefile_no_deps_pins() -> set[str]:
    pins = set()
    for line in (ROOT / "Makefile").read_text().splitlines():
        if "pip install" in line and "--no-deps" in line and "--force-reinstall" not in line:
            pins |= {w for w in line.split() if re.fullmatch(r"[A-Za-z0-9_.-]+==[0-9][^ ]*", w)}
    return pins


@pytest.mark.parametrize("path", [OFFICIAL, OFFLINE], ids=["official", "offline"])
def test_both_paths_install_the_repo_requirements_with_its_constraints_and_the_makefile_pins(path):
    installs = pip_installs(path)
    assert ["-r", "/opt/acme/requirements.txt", "-c", "/opt/acme/constraints.txt"] in installs
    no_deps = [args for args in installs if "--no-deps" in args]
    assert len(no_deps) == 1, no_deps
    assert set(no_deps[0]) - {"--no-deps"} == makefile_no_deps_pins()
    # The files of the repository itself, read at build time (other branches add packages to them).
    assert "requirements.txt constraints.txt /opt/acme/" in copies(path)


def test_the_pip_commands_and_llama_cpp_flags_of_both_paths_are_the_same():
    assert pip_installs(OFFICIAL) == pip_installs(OFFLINE)
    flags = makefile_variable("LLAMA_CPP_CMAKE_ARGS")
    assert env(OFFICIAL)["CMAKE_ARGS"] == env(OFFLINE)["CMAKE_ARGS"] == flags
    # The offline build takes the llama.cpp wheel built with those flags, from the folder named after them.
    assert makefile_variable("LLAMA_WHEELS").endswith("llama-cpp-avx2-noamx")
    assert "llama-cpp-avx2-noamx" in (ROOT / "docker" / "offline" / "build.sh").read_text()


def test_python_and_airflow_versions_match_the_pins():
    base = next(args for kind, args in instructions(OFFICIAL) if kind == "FROM")
    match = re.fullmatch(r"apache/airflow:(\d+\.\d+\.\d+)-python(3\.\d+)", base)
    assert match, base
    airflow_version, python_version = match.groups()
    constraints = (ROOT / "constraints.txt").read_text().splitlines()
    assert f"apache-airflow=={airflow_version}" in constraints
    requirements = (ROOT / "requirements.txt").read_text()
    assert re.search(rf"^apache-airflow\[[a-z,]+\]=={re.escape(airflow_version)}$", requirements, re.M)
    # The offline image runs the build machine's CPython 3.11 (bookworm's 3.11.2 is older than the
    # pins allow) on a debootstrapped Debian bookworm; build.sh refuses another minor version.
    build_script = (ROOT / "docker" / "offline" / "build.sh").read_text()
    assert python_version == "3.11"
    assert "debootstrap --variant=minbase bookworm" in build_script
    assert "sys.version_info[:2] == (3, 11)" in build_script
    assert "/opt/python/bin/python3.11 -m venv /opt/venv" in OFFLINE.read_text()


def test_system_packages_project_files_and_environment_are_the_same():
    # build-essential compiles llama.cpp in the official image; the offline one installs the wheel.
    assert apt_packages(OFFICIAL) - {"build-essential"} <= apt_packages(OFFLINE)
    project_files = [c for c in copies(OFFICIAL) if "/opt/airflow/" in c]
    assert project_files == [c for c in copies(OFFLINE) if "/opt/airflow/" in c]
    assert {c.split()[-2] for c in project_files} == {"dags/", "plugins/", "include/"}
    only_official = {"PIP_EXTRA_INDEX_URL"}  # PyTorch's CPU index; offline, its wheel is in the context
    only_offline = {
        "AIRFLOW_HOME",
        "PATH",
        "LANG",
        "LC_ALL",
        "PIP_DISABLE_PIP_VERSION_CHECK",
        "PIP_FIND_LINKS",
    }  # the official image's own
    official, offline = env(OFFICIAL), env(OFFLINE)
    assert {k: v for k, v in official.items() if k not in only_official} == {
        k: v for k, v in offline.items() if k not in only_offline
    }


def test_the_parser_sees_a_drift(tmp_path):
    drifted = tmp_path / "Dockerfile"
    drifted.write_text(OFFLINE.read_text().replace("jsonpickle==1.5.1", "jsonpickle==2.0.0"))
    assert pip_installs(drifted) != pip_installs(OFFICIAL)
    assert env(drifted)["CMAKE_ARGS"] == env(OFFICIAL)["CMAKE_ARGS"]
