"""jobjar: the submit command for each query and the jar's staleness check (no Maven, no Java)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.backends.local import jobjar
from harness.backends.local.jobjar import OPERATORS, TOPICS, is_stale, job_command, vertex_operator
from harness.topology import load_topology


@pytest.mark.parametrize("query", sorted(OPERATORS))
def test_operator_names_match_topologies(query: str) -> None:
    topo = load_topology(query)
    assert set(OPERATORS[query]) == set(topo.names)
    assert set(TOPICS[query]) == {op.topic for op in topo.sources}


def test_job_command_orders_parallelism_and_maps_options() -> None:
    main, args = job_command(
        "q1", "127.0.0.1:9092", {"sink": 1, "bids_source": 2, "map": 3},
        max_parallelism=128, from_earliest=True, window_size_s=None, group_id="g1",
    )
    assert main == "bench.nexmark.QueryJob"
    assert args[:4] == ["--query", "q1", "--bootstrap", "127.0.0.1:9092"]
    assert args[args.index("--parallelism") + 1] == "bids_source=2,map=3,sink=1"
    assert args[args.index("--max-parallelism") + 1] == "128"
    assert args[args.index("--group-id") + 1] == "g1"
    assert "--from-earliest" in args
    assert "--window-size-s" not in args  # None is left out


def test_job_command_defaults_group_and_skips_false_flags() -> None:
    _, args = job_command("q11", "b:1", {}, from_earliest=False, session_gap_s=10)
    assert "--from-earliest" not in args and "--parallelism" not in args
    assert args[args.index("--group-id") + 1] == "bench-q11"
    assert args[args.index("--session-gap-s") + 1] == "10"


@pytest.mark.parametrize(
    ("query", "par", "opts", "match"),
    [
        ("q4", {}, {}, "unknown query"),
        ("q1", {"window_join": 2}, {}, "no operator"),
        ("q1", {"map": 0}, {}, ">= 1"),
        ("q1", {}, {"no_such_option": 1}, "unknown job option"),
    ],
)
def test_job_command_rejects_bad_input(query: str, par: dict, opts: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        job_command(query, "b:1", par, **opts)


def test_vertex_operator_strips_source_prefix() -> None:
    assert vertex_operator("Source: bids_source") == "bids_source"
    assert vertex_operator("session_window") == "session_window"


def test_is_stale_follows_mtimes(tmp_path: Path) -> None:
    src = tmp_path / "A.java"
    jar = tmp_path / "x.jar"
    src.write_text("class A {}")
    assert is_stale(jar, [src])  # missing jar
    jar.write_text("jar")
    os.utime(src, (1000, 1000))
    os.utime(jar, (2000, 2000))
    assert not is_stale(jar, [src])
    os.utime(src, (3000, 3000))
    assert is_stale(jar, [src])


def test_ensure_jar_names_missing_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jobjar, "is_stale", lambda *_: True)
    monkeypatch.setattr(jobjar.shutil, "which", lambda tool: None if tool == "mvn" else "/usr/bin/java")
    with pytest.raises(jobjar.JobJarError, match="mvn not found"):
        jobjar.ensure_jar()
