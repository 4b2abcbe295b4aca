"""cluster.yaml is a valid `ray up` config for the pinned Ray.

Ray's own check is ``validate_config(prepare_config(config))``: ``prepare_config``
merges the provider's defaults.yaml first (as ``ray up`` does), without which
``validate_config`` rejects any hand-written file for a missing
``cluster_synced_files``. Neither function contacts the cloud provider.

Ray is imported inside the tests, not at module level, so collecting this file
does not load Ray into the test process.
"""

from __future__ import annotations

import copy
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.timeout(60)

CLUSTER_YAML = Path(__file__).resolve().parents[2] / "cluster.yaml"


def _load() -> dict[str, Any]:
    with CLUSTER_YAML.open(encoding="utf-8") as f:
        config = yaml.safe_load(f)
    assert isinstance(config, dict)
    return config


def _validate(config: dict[str, Any]) -> dict[str, Any]:
    """Run Ray's schema check the way `ray up` prepares a config; return the prepared one."""
    from ray.autoscaler._private.util import prepare_config, validate_config

    prepared = prepare_config(copy.deepcopy(config))
    validate_config(prepared)
    return prepared


def test_cluster_yaml_passes_ray_schema() -> None:
    prepared = _validate(_load())
    assert prepared["cluster_name"] == "pravega-ray"


def test_validate_config_rejects_non_integer_max_workers() -> None:
    """The check above can fail: a wrong type is caught, so a pass means something."""
    import jsonschema

    config = _load()
    config["max_workers"] = "two"
    with pytest.raises(jsonschema.ValidationError):
        _validate(config)


def test_cluster_yaml_has_head_and_fixed_worker_group() -> None:
    config = _load()
    node_types = config["available_node_types"]
    assert config["head_node_type"] in node_types
    workers = {name: t for name, t in node_types.items() if name != config["head_node_type"]}
    assert workers, "a head node plus at least one worker group"
    for name, node_type in workers.items():
        # Containers hold no CPU, so the autoscaler would see their nodes as idle and remove
        # any above min_workers: storage workers must be a fixed-size group.
        assert node_type["min_workers"] >= 1, name
        assert node_type["min_workers"] == node_type["max_workers"], name
    assert config["max_workers"] >= sum(t["max_workers"] for t in workers.values())


def test_cluster_yaml_installs_the_project_from_the_checkout() -> None:
    config = _load()
    mounts = config["file_mounts"]
    project_dirs = [remote for remote, local in mounts.items() if local == "."]
    assert len(project_dirs) == 1, mounts
    commands = config["setup_commands"]
    assert any("pip install" in c and project_dirs[0] in c for c in commands), commands
    assert any("openjdk-17" in c for c in commands), "Spark needs Java 17 on every node"


def test_cluster_yaml_docker_image_matches_installed_ray_and_python() -> None:
    import ray

    image = _load()["docker"]["image"]
    match = re.fullmatch(r"rayproject/ray:(?P<ray>[0-9.]+)-py(?P<py>\d+)(-cpu)?", image)
    assert match is not None, image
    assert match["ray"] == ray.__version__
    assert match["py"] == f"{sys.version_info.major}{sys.version_info.minor}"
