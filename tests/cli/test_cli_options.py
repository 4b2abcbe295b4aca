"""The ``pravega-ray`` command without a cluster: option parsing, exit codes 1/2/3, and that
``--help`` loads no Ray. In process through typer's CliRunner (cheap), except the import
check, which needs a fresh interpreter."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from pravega_ray.cli import main
from pravega_ray.cli.app import EXIT_NO_CLUSTER, EXIT_PRAVEGA_ERROR, EXIT_USAGE, app
from pravega_ray.cli.local import ray_temp_dir
from pravega_ray.cli.session import parse_host_port

pytestmark = pytest.mark.timeout(60)

runner = CliRunner()


@pytest.fixture(autouse=True)
def _ray_environment_restored() -> Iterator[None]:
    """The CLI sets RAY_* variables for Ray; keep this process's own."""
    keys = ("RAY_AUTH_MODE", "RAY_ENABLE_AUTO_CONNECT")
    saved = {k: os.environ.get(k) for k in keys}
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_help_lists_every_command_group_and_loads_no_ray() -> None:
    code = (
        "import sys\n"
        "from pravega_ray.cli import main\n"
        "assert main(['--help']) == 0\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('ray', 'raydp', 'pyspark')]\n"
        "assert not bad, bad\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    for group in ("local", "scope", "stream", "write", "read", "tail", "kvt", "rg"):
        assert group in done.stdout


def test_unknown_command_is_a_usage_error() -> None:
    result = runner.invoke(app, ["stream", "explode", "a/b"])
    assert result.exit_code == EXIT_USAGE
    assert "Traceback" not in result.output


def test_bad_option_value_is_a_usage_error() -> None:
    result = runner.invoke(app, ["stream", "create", "a/b", "--segments", "0"])
    assert result.exit_code == EXIT_USAGE


def test_retention_by_size_and_time_together_is_a_usage_error() -> None:
    args = ["stream", "create", "a/b", "--retention-max-bytes", "9", "--retention-max-ms", "9"]
    assert runner.invoke(app, args).exit_code == EXIT_USAGE


def test_routing_key_and_key_field_together_is_a_usage_error() -> None:
    args = ["write", "a/b", "--routing-key", "k", "--key-field", "id"]
    assert runner.invoke(app, args).exit_code == EXIT_USAGE


def test_invalid_name_is_a_pravega_error_without_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["stream", "info", "bad scope/x"]) == EXIT_PRAVEGA_ERROR
    err = capsys.readouterr().err
    assert "InvalidNameError" in err and "Traceback" not in err


def test_malformed_cut_is_a_pravega_error(capsys: pytest.CaptureFixture[str]) -> None:
    address = f"127.0.0.1:{closed_port()}"
    # The cut is parsed before the cluster is joined: no cluster is needed to refuse it.
    assert main(["--address", address, "stream", "truncate", "a/b", "!!"]) == EXIT_PRAVEGA_ERROR
    assert "InvalidArgumentError" in capsys.readouterr().err


def test_no_cluster_at_the_address_exits_3(capsys: pytest.CaptureFixture[str]) -> None:
    address = f"127.0.0.1:{closed_port()}"
    assert main(["--address", address, "scope", "list"]) == EXIT_NO_CLUSTER
    err = capsys.readouterr().err
    assert "no cluster reachable" in err and "Traceback" not in err


def test_verbose_shows_the_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    address = f"127.0.0.1:{closed_port()}"
    assert main(["-v", "--address", address, "scope", "list"]) == EXIT_NO_CLUSTER
    assert "Traceback" in capsys.readouterr().err


def test_address_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRAVEGA_RAY_ADDRESS", f"127.0.0.1:{closed_port()}")
    assert runner.invoke(app, ["scope", "list"]).exit_code == EXIT_NO_CLUSTER


def test_local_stop_with_nothing_running_exits_3(tmp_path: object) -> None:
    address = f"127.0.0.1:{closed_port()}"
    args = ["--address", address, "local", "stop", "--data-dir", str(tmp_path)]
    assert runner.invoke(app, args).exit_code == EXIT_NO_CLUSTER


def test_parse_host_port_accepts_only_host_and_port() -> None:
    assert parse_host_port("127.0.0.1:6379") == ("127.0.0.1", 6379)
    for address in ("auto", "ray://h:1", "h", "h:0", "h:99999", ":1", "h:x", "a:b:c"):
        assert parse_host_port(address) is None


def test_ray_temp_dir_stays_short_enough_for_sockets(tmp_path: object) -> None:
    from pathlib import Path

    assert ray_temp_dir(Path("/d")) == Path("/d/ray")
    long_dir = Path("/tmp") / ("x" * 80)
    temp = ray_temp_dir(long_dir)
    assert len(str(temp)) <= 40 and temp != Path("/tmp/ray")
    assert ray_temp_dir(long_dir) == temp  # the same data dir, the same temp dir


@pytest.mark.ray
def test_a_run_in_a_process_with_ray_leaves_that_ray_running(
    cluster, unique_name: str, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    """A command run in process (an app or a test calling ``main``) joins the Ray the process
    has and must not shut it down when it ends: that Ray is the caller's."""
    import ray

    address = ray.get_runtime_context().gcs_address
    cluster.stream_manager().create_scope(unique_name)
    assert main(["--json", "--address", address, "scope", "list"]) == 0
    assert unique_name in capsys.readouterr().out
    assert ray.is_initialized()
    assert unique_name in cluster.stream_manager().list_scopes()  # the session still answers
