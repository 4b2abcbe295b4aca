"""The package's shape: public names, a core that never imports Ray, and import arrows
that point one way between its layers."""

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
RAY_ALLOWED = {"cluster.py", "spark", "data", "cli"}
HEAVY = ("ray", "raydp", "pyspark")
ACTORS = "pravega_ray_actors"
"""The import name of the folder ``actors/`` (pyproject.toml, ``[tool.setuptools]``)."""


def core_modules() -> list[Path]:
    out = []
    for path in PACKAGE.rglob("*.py"):
        top = path.relative_to(PACKAGE).parts[0]
        if top not in RAY_ALLOWED:
            out.append(path)
    return sorted(out)


def absolute_imports(source: str) -> list[str]:
    """The absolute module names ``source`` imports, at module level or inside a function."""
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def test_core_modules_do_not_import_ray_statically() -> None:
    offenders = []
    for path in core_modules():
        for name in absolute_imports(path.read_text()):
            if name.split(".")[0] in (*HEAVY, ACTORS, "actors"):
                offenders.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not offenders, offenders


def test_no_module_imports_actors_by_its_folder_name() -> None:
    # An installed pravega-ray has no top-level `actors` (tests/unit/test_wheel.py): there,
    # `import actors` finds another library's package or nothing; run from the repository
    # root it would load a second copy of every actor module beside pravega_ray_actors.
    offenders = []
    for folder in ("pravega_ray", "actors", "tests", "examples", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for name in absolute_imports(path.read_text()):
                if name.split(".")[0] == "actors":
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


# docs/design.md "Layers", lowest layer first: a package may import the ones before it, never the
# ones after it (contracts; storage/logs/btree -> segmentstore -> controller; client). The
# contracts both sides depend on (records, service Protocols, reader-group state) are in
# contracts/, which imports none of the others; the client imports no server package.
SERVERS = ("storage", "logs", "btree", "segmentstore", "controller")
BRIDGES = ("client", "data", "spark", "cli", "cluster", "inprocess")
FORBIDDEN_IMPORTS: dict[str, tuple[str, ...]] = {
    "contracts": SERVERS + BRIDGES,
    "storage": ("segmentstore", "controller", *BRIDGES),
    "logs": ("segmentstore", "controller", *BRIDGES),
    "btree": ("segmentstore", "controller", *BRIDGES),
    "segmentstore": ("controller", *BRIDGES),
    "controller": BRIDGES,
    "client": (*SERVERS, "data", "spark", "cli", "cluster", "inprocess"),
}
KNOWN_VIOLATIONS: set[tuple[str, str]] = set()
"""(module, imported module) arrows that point the wrong way today, each reported to the
owner of the importing package; empty is the goal."""


def imported_modules(source: str, package: str) -> set[str]:
    """Every ``pravega_ray`` module ``source`` (a module of ``package``) imports, at module
    level or inside a function.

    ``from pravega_ray import client`` counts as importing ``pravega_ray.client``;
    relative imports are resolved against ``package``.
    """
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0]
                base = f"{parent}.{base}" if base else parent
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
    return {m for m in found if m.split(".")[0] == "pravega_ray"}


def test_package_import_arrows_point_one_way() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).parts
        forbidden = FORBIDDEN_IMPORTS.get(parts[0], ()) if len(parts) > 1 else ()
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        package = ".".join(path.relative_to(ROOT).parent.parts)
        for imported in sorted(imported_modules(path.read_text(), package)):
            top = imported.split(".")[1] if "." in imported else ""
            if top in forbidden and (module, imported) not in KNOWN_VIOLATIONS:
                offenders.append(f"{module} imports {imported}")
    assert not offenders, offenders


def test_the_client_would_be_caught_importing_a_server_package() -> None:
    # The client imports no server package: the rule, held against a made-up client module.
    source = "from pravega_ray.controller.stream_workflows import StreamWorkflows\n"
    imported = imported_modules(source, "pravega_ray.client")
    assert any(m.split(".")[1] in FORBIDDEN_IMPORTS["client"] for m in imported)
    assert {"controller", "segmentstore"} <= set(FORBIDDEN_IMPORTS["client"])


def test_imported_modules_sees_function_level_and_relative_imports() -> None:
    source = (
        "import json\n"
        "def f():\n"
        "    from pravega_ray import client\n"
        "    from ..client.reader import EventStreamReader\n"
        "    from . import records\n"
        "    import pravega_ray.client.writer\n"
    )
    assert imported_modules(source, "pravega_ray.controller") == {
        "pravega_ray",
        "pravega_ray.client",
        "pravega_ray.client.reader",
        "pravega_ray.client.reader.EventStreamReader",
        "pravega_ray.controller",
        "pravega_ray.controller.records",
        "pravega_ray.client.writer",
    }


def documented_public_names() -> set[str]:
    text = (ROOT / "docs" / "api.md").read_text()
    block = re.search(r"<!-- public-names -->(.*?)<!-- /public-names -->", text, re.S)
    assert block, "docs/api.md must list the public names between public-names markers"
    return set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", block.group(1)))


def test_all_matches_the_documented_public_names() -> None:
    assert set(pravega_ray.__all__) == documented_public_names()
    assert pravega_ray.__all__ == sorted(pravega_ray.__all__)
    assert set(pravega_ray.errors.__all__) <= set(pravega_ray.__all__)  # every error exported


def test_every_public_name_resolves() -> None:
    for name in pravega_ray.__all__:
        if name not in ("Cluster", "connect", "start_local", "spark", "data"):  # these load Ray
            assert getattr(pravega_ray, name) is not None


def test_errors_module_draws_every_error_in_its_tree() -> None:
    from pravega_ray import errors

    doc = errors.__doc__ or ""
    for name in errors.__all__:
        assert name in doc, f"{name} missing from the tree in errors.py's docstring"
