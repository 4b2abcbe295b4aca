"""The package's shape: public names, and a core that never imports Ray."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import pravega_ray

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "pravega_ray"
# docs/design.md "Layers": only cluster.py and the bridges import ray (or Spark).
RAY_ALLOWED = {"cluster.py", "spark", "data"}
HEAVY = ("ray", "raydp", "pyspark")


def core_modules() -> list[Path]:
    out = []
    for path in PACKAGE.rglob("*.py"):
        top = path.relative_to(PACKAGE).parts[0]
        if top not in RAY_ALLOWED:
            out.append(path)
    return sorted(out)


def test_core_modules_do_not_import_ray_statically() -> None:
    offenders = []
    for path in core_modules():
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                if name.split(".")[0] in HEAVY or name.split(".")[0] == "actors":
                    offenders.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not offenders, offenders


def test_importing_the_core_loads_no_ray() -> None:
    modules = [
        ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for p in core_modules()
    ]
    code = (
        "import sys, importlib\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('ray', 'raydp', 'pyspark')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def documented_public_names() -> set[str]:
    text = (ROOT / "docs" / "api.md").read_text()
    block = re.search(r"<!-- public-names -->(.*?)<!-- /public-names -->", text, re.S)
    assert block, "docs/api.md must list the public names between public-names markers"
    return set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", block.group(1)))


def test_all_matches_the_documented_public_names() -> None:
    assert set(pravega_ray.__all__) == documented_public_names()
    assert pravega_ray.__all__ == sorted(pravega_ray.__all__)


def test_every_public_name_resolves() -> None:
    for name in pravega_ray.__all__:
        if name not in ("Cluster", "connect", "start_local", "spark"):  # these load Ray
            assert getattr(pravega_ray, name) is not None


def test_errors_module_draws_every_error_in_its_tree() -> None:
    from pravega_ray import errors

    doc = errors.__doc__ or ""
    for name in errors.__all__:
        assert name in doc, f"{name} missing from the tree in errors.py's docstring"
