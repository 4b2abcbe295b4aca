"""What installing pravega-ray puts on ``sys.path``: ``pravega_ray`` and ``pravega_ray_actors``
(the folder ``actors/``, renamed by pyproject.toml's ``[tool.setuptools]``), and no top-level
``actors``, a name other libraries use. Had the wheel one, installing pravega-ray would shadow
another library's ``actors`` or be shadowed by it, depending on the order of ``sys.path``.

The wheel tests build the wheel with pip (about 15 s, no Ray started); deselect them with
``-m "not wheel"`` in the inner loop.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[2]
INSTALLED_AS = {"pravega_ray": "pravega_ray", "actors": "pravega_ray_actors"}
"""Folder of the repository -> the package name it is installed as."""
BUILD_INPUTS = ("pyproject.toml", "README.md")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel pip builds from a copy of the sources.

    A copy, so the build leaves no ``build/`` or ``*.egg-info`` in the repository, and files
    a previous build left in ``build/`` cannot slip into the wheel.
    """
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"
    source.mkdir()
    for name in BUILD_INPUTS:
        shutil.copy2(ROOT / name, source / name)
    for folder in INSTALLED_AS:
        shutil.copytree(
            ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
        )
    dist = tmp / "dist"
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(dist)]
    result = subprocess.run(
        [*command, str(source)], capture_output=True, text=True, cwd=tmp, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (built,) = dist.glob("pravega_ray-*.whl")
    return built


def source_modules() -> set[str]:
    """Every module of the sources, as its path inside the wheel."""
    return {
        f"{package}/{path.relative_to(ROOT / folder).as_posix()}"
        for folder, package in INSTALLED_AS.items()
        for path in (ROOT / folder).rglob("*.py")
        if "__pycache__" not in path.parts
    }


@pytest.mark.wheel
def test_wheel_holds_pravega_ray_and_pravega_ray_actors_and_no_actors(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    top_level = {name.split("/")[0] for name in names if ".dist-info/" not in name}
    assert top_level == {"pravega_ray", "pravega_ray_actors"}
    # Equal, not a subset: a subpackage missing from pyproject.toml's list is missing here.
    modules = {name for name in names if name.endswith(".py")}
    assert sorted(source_modules() - modules) == []
    assert sorted(modules - source_modules()) == []


CHECK_INSTALLED = """
import importlib, json, pkgutil, sys

site, other_library, environment = sys.argv[1:4]
sys.path.insert(0, site)
sys.path += [other_library, environment]  # after the wheel, as a later install would be

import pravega_ray_actors

actor_modules = [
    m.name for m in pkgutil.iter_modules(pravega_ray_actors.__path__, "pravega_ray_actors.")
]
for name in [*actor_modules, "pravega_ray.cluster"]:
    importlib.import_module(name)
ours = {
    name: getattr(module, "__file__", None)
    for name, module in sys.modules.items()
    if name.split(".")[0] in ("pravega_ray", "pravega_ray_actors")
}
imported_actors = "actors" in sys.modules
actors = importlib.import_module("actors")  # the other library's

print(json.dumps({
    "actor_modules": actor_modules,
    "ours": ours,
    "imported_actors": imported_actors,
    "actors_owner": getattr(actors, "OWNER", actors.__file__),
}))
"""


@pytest.mark.wheel
def test_installed_wheel_imports_pravega_ray_actors_and_not_another_actors(
    wheel: Path, tmp_path: Path
) -> None:
    with zipfile.ZipFile(wheel) as archive:
        (wheel_metadata,) = [n for n in archive.namelist() if n.endswith(".dist-info/WHEEL")]
        # A pure wheel installs by unpacking it into site-packages (what pip does, 5 s slower).
        assert "Root-Is-Purelib: true" in archive.read(wheel_metadata).decode()
        site = tmp_path / "site"
        archive.extractall(site)
    # Another library's top-level `actors`, on sys.path after pravega-ray.
    other_library = tmp_path / "other-library"
    (other_library / "actors").mkdir(parents=True)
    (other_library / "actors" / "__init__.py").write_text('OWNER = "another library"\n')
    environment = sysconfig.get_paths()["purelib"]  # ray and the other dependencies

    # -I: no current directory, script directory or PYTHONPATH on sys.path; -S: no
    # site-packages and no .pth files, so not the editable install of this repository.
    result = subprocess.run(
        [
            sys.executable,
            "-I",
            "-S",
            "-c",
            CHECK_INSTALLED,
            str(site),
            str(other_library),
            environment,
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.splitlines()[-1])

    expected_actor_modules = {
        f"pravega_ray_actors.{path.stem}"
        for path in (ROOT / "actors").glob("*.py")
        if path.stem != "__init__"
    }
    assert set(found["actor_modules"]) == expected_actor_modules
    outside = {
        name: file for name, file in found["ours"].items() if not (file or "").startswith(str(site))
    }
    assert outside == {}
    assert not found["imported_actors"], "pravega-ray imported a top-level `actors`"
    assert found["actors_owner"] == "another library"


def test_this_environment_has_pravega_ray_actors_and_no_actors_of_ours(tmp_path: Path) -> None:
    """The install this run uses (``make venv``: editable) maps ``pravega_ray_actors`` to the
    folder ``actors/`` and puts no ``actors`` of this repository on ``sys.path``."""
    code = (
        "import importlib.util, json\n"
        "ours = importlib.util.find_spec('pravega_ray_actors')\n"
        "theirs = importlib.util.find_spec('actors')\n"
        "print(json.dumps([ours.origin, theirs and theirs.origin]))\n"
    )
    # -I: the current directory (outside the repository here) is not on sys.path either.
    result = subprocess.run(
        [sys.executable, "-I", "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    ours, theirs = json.loads(result.stdout)
    assert Path(ours).name == "__init__.py"
    assert (Path(ours).parent / "options.py").exists()
    assert theirs is None or not Path(theirs).is_relative_to(ROOT), theirs
