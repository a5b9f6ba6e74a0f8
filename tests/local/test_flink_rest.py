"""Parsing recorded Flink 2.2 REST responses and mapping vertices to our operator names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.backends import flink_rest
from harness.backends.flink_rest import (
    Bounds,
    FlinkRest,
    FlinkRestError,
    Vertex,
    map_vertices,
    parse_checkpoints,
    parse_job,
    vertex_operators,
)

FIX = Path(__file__).parent / "fixtures"


def load(name: str) -> dict:
    return json.loads((FIX / name).read_text())


def test_vertex_names_to_operators() -> None:
    assert vertex_operators("Source: bids_source") == ["bids_source"]
    assert vertex_operators("sink: Writer") == ["sink"]
    assert vertex_operators("Source: a -> map -> sink: Writer") == ["a", "map", "sink"]


def test_parse_recorded_job_and_map_operators() -> None:
    job = parse_job(load("flink_job.json"))
    assert job.state == "RUNNING" and job.running
    assert [v.parallelism for v in job.vertices] == [1, 1, 1]
    ids = map_vertices(job.vertices, ["bids_source", "map", "sink"])
    assert ids == {
        "bids_source": "590c5e1a5fc04d230c6fec7456f75288",
        "map": "23ab3a59b17e9c45f95cff4c728611fc",
        "sink": "2e588ce1c86a9d46e2e85186773ce4fd",
    }


def test_exact_name_wins_over_substring() -> None:
    vs = [Vertex("a", "flat_map_x", 1, "RUNNING"), Vertex("b", "map", 1, "RUNNING")]
    assert map_vertices(vs, ["map", "flat_map"]) == {"map": "b", "flat_map": "a"}


def test_job_not_running_while_subtasks_deploy() -> None:
    data = load("flink_job.json")
    data["vertices"][1]["parallelism"] = 2  # one new subtask still DEPLOYING
    data["vertices"][1]["tasks"]["DEPLOYING"] = 1
    assert not parse_job(data).running


def test_parse_checkpoints() -> None:
    cp = parse_checkpoints(load("flink_checkpoints.json"))
    assert cp.completed == 2 and cp.restored == 1 and cp.failed == 0
    assert cp.latest_completed_id == 10 and cp.latest_restored_id == 8
    assert cp.latest_state_bytes == 265


class FakeResponse:
    def __init__(self, status: int, body: object) -> None:
        self.status_code = status
        self._body = body
        self.text = json.dumps(body)
        self.content = self.text.encode()

    def json(self) -> object:
        return self._body


def test_resource_requirements_roundtrip(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[tuple[str, str, object]] = []

    def fake_request(method: str, url: str, json: object = None, timeout: float = 0) -> FakeResponse:
        sent.append((method, url, json))
        if method == "GET":
            return FakeResponse(200, load("flink_resource_requirements.json"))
        return FakeResponse(200, {})

    monkeypatch.setattr(flink_rest.requests, "request", fake_request)
    rest = FlinkRest("http://x:1/")
    req = rest.resource_requirements("J")
    assert req["23ab3a59b17e9c45f95cff4c728611fc"] == Bounds(1, 1)
    rest.set_resource_requirements("J", {"v1": Bounds(1, 3)})
    method, url, body = sent[-1]
    assert method == "PUT" and url == "http://x:1/jobs/J/resource-requirements"
    assert body == {"v1": {"parallelism": {"lowerBound": 1, "upperBound": 3}}}


def test_savepoint_status_and_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = iter([
        FakeResponse(200, {"status": {"id": "IN_PROGRESS"}}),
        FakeResponse(200, {"status": {"id": "COMPLETED"}, "operation": {"location": "file:/sp/savepoint-1"}}),
        FakeResponse(404, {"errors": ["Job not found"]}),
    ])
    monkeypatch.setattr(flink_rest.requests, "request", lambda *a, **k: next(answers))
    rest = FlinkRest("http://x:1")
    assert not rest.savepoint_status("J", "T").done
    st = rest.savepoint_status("J", "T")
    assert st.done and st.location == "file:/sp/savepoint-1"
    with pytest.raises(FlinkRestError, match="404"):
        rest.savepoint_status("J", "T")
