"""Topology files: the operator fields the sim reads, parsed strictly."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.topology import load_topology


def write(tmp: Path, window: dict) -> Path:
    ops = [{"name": "src", "topic": "bids"}, {"name": "win", "upstream": ["src"], **window},
           {"name": "sink", "upstream": ["win"], "selectivity": 0.0}]
    (tmp / "qx.yaml").write_text(yaml.safe_dump({"query": "qx", "operators": ops}))
    return tmp


def test_fires_on_watermark_is_a_yes_or_no_and_nothing_else(tmp_path: Path) -> None:
    assert load_topology("qx", write(tmp_path, {"fires_on_watermark": True})).op("win").fires_on_watermark
    other = tmp_path / "other"
    other.mkdir()
    assert not load_topology("qx", write(other, {})).op("win").fires_on_watermark  # absent: no
    bad = tmp_path / "bad"
    bad.mkdir()
    with pytest.raises(ValueError, match=r"qx.yaml.*'win'.*fires_on_watermark must be true or false, got 'yes'"):
        load_topology("qx", write(bad, {"fires_on_watermark": "yes"}))


def test_hops_count_the_edges_down_from_a_source() -> None:
    q8 = load_topology("q8")
    assert q8.hops("person_source", "window_join") == 1 and q8.hops("auction_source", "sink") == 2
    with pytest.raises(ValueError, match="not downstream"):
        q8.hops("window_join", "person_source")
