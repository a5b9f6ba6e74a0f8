"""`bench up/status/down` exit codes and messages, without starting any service."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from harness.backends.local import stack as stack_mod
from harness.backends.local.commands import register
from harness.backends.local.install import Installation


@pytest.fixture
def app() -> typer.Typer:
    a = typer.Typer()
    register(a)

    @a.command()
    def noop() -> None:  # a Typer app with one command would flatten it; keep subcommands
        pass

    return a


@pytest.fixture
def no_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = Installation(java_home=tmp_path, flink_home=tmp_path, kafka_libs=tmp_path, jmx_agent=tmp_path,
                        prometheus_bin=tmp_path, versions={})
    monkeypatch.setattr(stack_mod.LocalStack, "ensure_installed", lambda self, progress=None: fake)


def test_status_of_a_stack_that_is_not_up_exits_3(app: typer.Typer, tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["status", "--workdir", str(tmp_path), "--port-offset", "3300"])
    assert res.exit_code == 3
    assert "kafka" in res.output and "stopped" in res.output


def test_status_shows_the_stack_directorys_and_the_install_caches_sizes(app: typer.Typer, tmp_path: Path) -> None:
    (tmp_path / "kafka").mkdir()
    (tmp_path / "kafka" / "segment.log").write_bytes(b"x" * (3 << 20))  # 3 MB of data, as a stopped broker leaves
    res = CliRunner().invoke(app, ["status", "--workdir", str(tmp_path), "--port-offset", "3300"])
    assert f"stack directory {tmp_path.resolve()}: 3.0 MB" in " ".join(res.output.split()), res.output
    assert "install cache " in res.output


def test_down_on_an_empty_workdir_is_fine(app: typer.Typer, tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["down", "--workdir", str(tmp_path), "--port-offset", "3300"])
    assert res.exit_code == 0, res.output
    assert "stopped" in res.output


def test_up_with_a_port_in_use_exits_1_naming_the_port(
    app: typer.Typer, tmp_path: Path, no_install: None
) -> None:
    offset = 3300
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", 8081 + offset))
        s.listen()
        res = CliRunner().invoke(app, ["up", "--workdir", str(tmp_path), "--port-offset", str(offset)])
    assert res.exit_code == 1
    assert f"port {8081 + offset}" in res.output and "flink rest" in res.output
    assert not (tmp_path / "run").exists() or not list((tmp_path / "run").glob("*.pid"))
