"""Spark session configuration and temp cleanup, without starting Spark or Ray."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from pravega_ray.errors import IllegalStateError, InvalidArgumentError
from pravega_ray.spark import session
from pravega_ray.spark.session import (
    ADD_OPENS_PACKAGES,
    EXTRA_JAVA_OPTIONS_KEYS,
    clean_raydp_temp_folders,
    jdk17_java_options,
    merge_spark_configs,
)

pytestmark = pytest.mark.timeout(30)

# The packages docs/stack.md lists as necessary; the module may open more, never fewer.
STACK_MD_PACKAGES = (
    "java.lang",
    "java.lang.invoke",
    "java.io",
    "java.net",
    "java.nio",
    "java.math",
    "java.text",
    "java.util",
    "java.util.concurrent",
    "java.util.concurrent.atomic",
    "sun.nio.ch",
    "sun.nio.cs",
    "sun.security.action",
    "sun.util.calendar",
)


def test_extra_java_options_keys_are_driver_app_master_and_executor() -> None:
    assert set(EXTRA_JAVA_OPTIONS_KEYS) == {
        "spark.driver.extraJavaOptions",
        "spark.ray.raydp_app_master.extraJavaOptions",
        "spark.executor.extraJavaOptions",
    }


def test_merge_spark_configs_adds_every_add_opens_flag_to_each_key() -> None:
    merged = merge_spark_configs()
    assert set(STACK_MD_PACKAGES) <= set(ADD_OPENS_PACKAGES)
    for key in EXTRA_JAVA_OPTIONS_KEYS:
        options = shlex.split(merged[key])
        assert "-XX:+IgnoreUnrecognizedVMOptions" in options
        for package in ADD_OPENS_PACKAGES:
            assert f"--add-opens=java.base/{package}=ALL-UNNAMED" in options, (key, package)


def test_merge_spark_configs_keeps_user_options_first() -> None:
    user = {
        "spark.driver.extraJavaOptions": "-Dmy.flag=1 -Xss4m",
        "spark.executor.extraJavaOptions": "-Dexecutor.flag='a b'",
        "spark.sql.shuffle.partitions": "16",
        "spark.custom.setting": "x",
    }
    merged = merge_spark_configs(user)
    driver = shlex.split(merged["spark.driver.extraJavaOptions"])
    assert driver[:2] == ["-Dmy.flag=1", "-Xss4m"]
    executor = shlex.split(merged["spark.executor.extraJavaOptions"])
    assert executor[0] == "-Dexecutor.flag=a b"
    assert set(jdk17_java_options()) <= set(executor)
    assert merged["spark.sql.shuffle.partitions"] == "16"  # the caller wins over defaults
    assert merged["spark.custom.setting"] == "x"


def test_merge_spark_configs_does_not_repeat_flags_the_user_gave() -> None:
    flag = "--add-opens=java.base/java.lang=ALL-UNNAMED"
    merged = merge_spark_configs({"spark.driver.extraJavaOptions": flag})
    assert shlex.split(merged["spark.driver.extraJavaOptions"]).count(flag) == 1
    # Merging the merged result again changes nothing.
    assert merge_spark_configs(merged) == merged


def test_merge_spark_configs_leaves_the_input_unchanged() -> None:
    user = {"spark.driver.extraJavaOptions": "-Dx=1"}
    merge_spark_configs(user)
    assert user == {"spark.driver.extraJavaOptions": "-Dx=1"}


def test_merge_spark_configs_rejects_non_string_values() -> None:
    with pytest.raises(InvalidArgumentError):
        merge_spark_configs({"spark.executor.cores": 2})  # type: ignore[dict-item]


def test_init_spark_without_ray_raises_illegal_state(monkeypatch: pytest.MonkeyPatch) -> None:
    import ray

    # Pretend Ray is down even if another test of this session started it.
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    with pytest.raises(IllegalStateError, match="Ray is not initialized"):
        session.init_spark()


def test_clean_raydp_temp_folders_removes_only_digit_directories(tmp_path: Path) -> None:
    (tmp_path / "1795311587726").mkdir()
    (tmp_path / "1795311587726" / "libcore_worker_library_java.so").write_bytes(b"x" * 10)
    (tmp_path / "42").mkdir()
    keep_dirs = ["session_2026-11-22_01-39-40_195570_3765", "12a", "session_latest", "٣٤"]
    for name in keep_dirs:
        (tmp_path / name).mkdir()
    (tmp_path / "4242").write_bytes(b"a file named by digits")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_bytes(b"keep")
    (tmp_path / "777").symlink_to(outside, target_is_directory=True)

    removed = clean_raydp_temp_folders(tmp_path)

    assert sorted(p.name for p in removed) == ["1795311587726", "42"]
    remaining = sorted(p.name for p in tmp_path.iterdir())
    assert remaining == sorted([*keep_dirs, "4242", "777", "outside"])
    assert (outside / "precious").read_bytes() == b"keep"


def test_clean_raydp_temp_folders_with_missing_root_removes_nothing(tmp_path: Path) -> None:
    assert clean_raydp_temp_folders(tmp_path / "absent") == []
