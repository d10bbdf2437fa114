"""Unsafe calls never appear in the project's code (issue 8, security): read by ``ast``, not by grep.

Refused everywhere under dags/, plugins/, stack/, scripts/ and benchmarks/:
- deserializers that run code: pickle and its relatives, ``yaml.load``/``unsafe_load``/``full_load``
  (``yaml.safe_load`` only), ``torch.load`` without ``weights_only=True``;
- a shell between our strings and a command: ``shell=True``, ``os.system``, ``os.popen``;
- ``eval`` and ``exec``.

One file may import pickle, for one reason (``ALLOWED``): PyTorch writes its Flight Recorder dumps as pickles,
and ``acme.recovery.flight_recorder`` reads them through an Unpickler whose ``find_class`` refuses every class
and function but plain builtins (Python's documented way to restrict unpickling); its tests check that a
pickle naming anything else is refused unrun.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("dags", "plugins", "stack", "scripts", "benchmarks")
UNSAFE_MODULES = {"pickle", "cPickle", "dill", "cloudpickle", "marshal", "shelve", "jsonpickle"}
UNSAFE_CALLS = {
    ("yaml", "load"): "yaml.load (use yaml.safe_load)",
    ("yaml", "unsafe_load"): "yaml.unsafe_load",
    ("yaml", "full_load"): "yaml.full_load",
    ("os", "system"): "os.system (a shell)",
    ("os", "popen"): "os.popen (a shell)",
}


ALLOWED = {
    (
        "plugins/acme/recovery/flight_recorder.py",
        "imports pickle",
    ): "a restricted Unpickler (see the docstring)",
}


def python_files() -> list[Path]:
    return sorted(path for folder in FOLDERS for path in (ROOT / folder).rglob("*.py"))


def findings(source: str, name: str) -> list[str]:
    """The unsafe constructs in one file, each as ``file:line: what``."""
    found = []
    for node in ast.walk(ast.parse(source, filename=name)):
        where = f"{name}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import | ast.ImportFrom):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            found += [f"{where}: imports {m}" for m in modules if m.split(".")[0] in UNSAFE_MODULES]
        if not isinstance(node, ast.Call):
            continue
        function = node.func
        if isinstance(function, ast.Name) and function.id in ("eval", "exec"):
            found.append(f"{where}: {function.id}()")
        if isinstance(function, ast.Attribute) and isinstance(function.value, ast.Name):
            pair = (function.value.id, function.attr)
            if pair in UNSAFE_CALLS:
                found.append(f"{where}: {UNSAFE_CALLS[pair]}")
            if pair == ("torch", "load") and not any(
                k.arg == "weights_only" and isinstance(k.value, ast.Constant) and k.value.value is True
                for k in node.keywords
            ):
                found.append(f"{where}: torch.load without weights_only=True (unpickles)")
        for keyword in node.keywords:
            if keyword.arg == "shell" and not (
                isinstance(keyword.value, ast.Constant) and keyword.value.value is False
            ):
                found.append(f"{where}: shell=… (a shell)")
    return found


def test_the_project_s_code_has_no_unsafe_call():
    files = python_files()
    assert len(files) > 50  # the walk found the code
    problems = [p for path in files for p in findings(path.read_text(), str(path.relative_to(ROOT)))]
    assert [p for p in problems if (p.split(":")[0], p.split(": ", 1)[1]) not in ALLOWED] == []


@pytest.mark.parametrize(
    ("source", "what"),
    [
        ("import pickle\n", "imports pickle"),
        ("from cloudpickle import loads\n", "imports cloudpickle"),
        ("import yaml\nyaml.load(open('x'))\n", "yaml.load"),
        ("import yaml\nyaml.full_load('a: 1')\n", "yaml.full_load"),
        ("import subprocess\nsubprocess.run('ls', shell=True)\n", "shell="),
        ("import subprocess\nflag = True\nsubprocess.run('ls', shell=flag)\n", "shell="),
        ("import os\nos.system('ls')\n", "os.system"),
        ("x = eval('1+1')\n", "eval()"),
        ("import torch\ntorch.load('m.pt')\n", "torch.load without weights_only"),
        ("import torch\ntorch.load('m.pt', weights_only=False)\n", "torch.load without weights_only"),
    ],
)
def test_each_unsafe_construct_is_found(source, what):
    assert any(what in problem for problem in findings(source, "planted.py"))


def test_safe_forms_are_not_reported():
    safe = (
        "import yaml, subprocess, torch\n"
        "yaml.safe_load('a: 1')\n"
        "subprocess.run(['scontrol', 'show', 'job', '1'], shell=False, check=True)\n"
        "torch.load('m.pt', map_location='cpu', weights_only=True)\n"
    )
    assert findings(safe, "safe.py") == []
