"""benchmarks/ is a package run as ``python -m benchmarks.<name>`` from the repository root:
importing any of its modules starts nothing and needs no ``sys.path`` tricks, every entry point
answers ``--help``, and every ``make bench*`` target names one of them."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[3]
BENCHMARKS = ROOT / "benchmarks"


def module_names() -> list[str]:
    """Every module of the benchmarks package, packages by their own name."""
    names = []
    for path in sorted(BENCHMARKS.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__main__":
            continue
        names.append(".".join(parts).removesuffix(".__init__"))
    return names


def entry_points() -> list[str]:
    """Modules run with ``python -m``: a ``__main__`` guard, or a package with ``__main__.py``."""
    names = []
    for path in sorted(BENCHMARKS.rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        if path.name == "__main__.py":
            names.append(module.removesuffix(".__main__"))
        elif 'if __name__ == "__main__":' in path.read_text():
            names.append(module)
    return names


def test_no_benchmark_changes_sys_path() -> None:
    offenders = [
        str(p.relative_to(ROOT)) for p in BENCHMARKS.rglob("*.py") if "sys.path" in p.read_text()
    ]
    assert not offenders, offenders


def test_every_make_bench_target_runs_an_entry_point_with_dash_m() -> None:
    makefile = (ROOT / "Makefile").read_text()
    targets = re.findall(r"^(bench[\w-]*):.*\n\t(.*)$", makefile, re.MULTILINE)
    assert targets, "no bench targets in the Makefile"
    entries = set(entry_points())
    for target, command in targets:
        match = re.search(r"\$\(PY\) -m (benchmarks\.\w+)", command)
        assert match, f"make {target}: {command!r} does not run python -m benchmarks.<name>"
        assert match.group(1) in entries, f"make {target}: {match.group(1)} is no entry point"


def test_importing_every_module_and_asking_for_help_starts_nothing() -> None:
    """In one fresh interpreter started in the repository root, which is all ``python -m``
    puts on the path: import every module, then run every entry point with ``--help`` as
    ``python -m`` does (``runpy``). Afterwards no directory of the repository was added to
    ``sys.path``, and the process still has one thread, no child process and no Ray."""
    code = f"""
import contextlib, importlib, io, json, runpy, sys, threading, warnings
import psutil

path_before = list(sys.path)
for name in {module_names()!r}:
    importlib.import_module(name)
helps = {{}}
for name in {entry_points()!r}:
    sys.argv = [name, "--help"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # runpy: module already imported
        try:
            runpy.run_module(name, run_name="__main__", alter_sys=True)
            code = "returned"
        except SystemExit as e:
            code = e.code
    helps[name] = [code, out.getvalue()[:200]]
ray = sys.modules.get("ray")
print(json.dumps({{
    "path_added": [p for p in sys.path if p not in path_before],
    "threads": threading.active_count(),
    "children": len(psutil.Process().children()),
    "ray_initialized": bool(ray and ray.is_initialized()),
    "helps": helps,
}}))
"""
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=170
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    # Ray adds its own thirdparty_files directory (in the venv, which may lie in the repository);
    # nothing may add a directory of the repository's code.
    venv = Path(sys.prefix).resolve()
    added = [
        p
        for p in report["path_added"]
        if Path(p).resolve().is_relative_to(ROOT) and not Path(p).resolve().is_relative_to(venv)
    ]
    assert not added, added
    assert report["threads"] == 1
    assert report["children"] == 0
    assert not report["ray_initialized"]
    assert set(report["helps"]) == set(entry_points())
    for name, (code, text) in report["helps"].items():
        assert code == 0, f"{name} --help exited with {code!r}"
        assert text.startswith("usage: "), f"{name} --help printed {text!r}"
