"""A typed client for the Flink REST API, shared by the `local` and `k8s` backends.

Users: the local stack (health, task managers, jar upload and run), both backends' monitors and
executors (job details, vertex id <-> operator name, per-vertex resource requirements for in-place
rescaling, stop-with-savepoint, checkpoints, exceptions).
Responses are parsed into small frozen dataclasses here so the rest of the harness never
indexes raw JSON. Endpoints: https://nightlies.apache.org/flink/flink-docs-stable/docs/ops/rest_api/
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

# Flink job states in which no record is processed (the job is being (re)deployed or is gone).
TERMINAL_STATES = frozenset({"FINISHED", "CANCELED", "FAILED", "SUSPENDED"})


class FlinkRestError(RuntimeError):
    """A REST call failed or returned something we cannot use."""


class JobSubmitError(FlinkRestError):
    """Uploading or running a job jar failed; `piece` names what ("job jar", "flink job")."""

    def __init__(self, piece: str, message: str) -> None:
        super().__init__(f"{piece}: {message}")
        self.piece = piece
        self.message = message


@dataclass(frozen=True)
class UploadedJar:
    """A jar in the job manager's upload directory (`GET /jars`)."""

    id: str  # Flink's stored file name: <uuid>_<name>
    name: str  # the file name it was uploaded as
    uploaded_ms: int


@dataclass(frozen=True)
class Vertex:
    """One job vertex as the REST API shows it."""

    id: str
    name: str
    parallelism: int
    status: str
    tasks: dict[str, int] = field(default_factory=dict)  # subtask state -> count

    @property
    def running_subtasks(self) -> int:
        return int(self.tasks.get("RUNNING", 0))

    @property
    def fully_running(self) -> bool:
        return self.status == "RUNNING" and self.running_subtasks == self.parallelism


@dataclass(frozen=True)
class JobDetails:
    jid: str
    name: str
    state: str
    vertices: tuple[Vertex, ...]
    start_time_ms: int = 0
    timestamps: dict[str, int] = field(default_factory=dict)

    @property
    def running(self) -> bool:
        """RUNNING and every subtask of every vertex deployed and running (records flow)."""
        return self.state == "RUNNING" and all(v.fully_running for v in self.vertices)

    def vertex(self, vertex_id: str) -> Vertex:
        for v in self.vertices:
            if v.id == vertex_id:
                return v
        raise KeyError(vertex_id)


@dataclass(frozen=True)
class Bounds:
    """Per-vertex parallelism bounds of the adaptive scheduler (resource requirements)."""

    lower: int
    upper: int


@dataclass(frozen=True)
class SavepointStatus:
    done: bool
    location: str | None = None
    failure: str | None = None


@dataclass(frozen=True)
class CheckpointStats:
    completed: int
    failed: int
    in_progress: int
    restored: int
    latest_completed_id: int | None = None
    latest_completed_ms: int | None = None  # latest_ack_timestamp of the last completed checkpoint
    latest_restored_id: int | None = None
    latest_restored_ms: int | None = None
    latest_state_bytes: int | None = None


@dataclass(frozen=True)
class JobException:
    timestamp_ms: int
    name: str
    message: str
    task: str | None = None
    taskmanager: str | None = None


@dataclass(frozen=True)
class TaskManagerInfo:
    id: str
    slots: int
    free_slots: int


# ------------------------------------------------------------------ vertex name <-> operator name

_SOURCE_PREFIX = re.compile(r"^Source:\s*")
_SINK_SUFFIX = re.compile(r":\s*(Writer|Committer|Pre-?Write|Post-?Commit)$", re.IGNORECASE)


def vertex_operators(vertex_name: str) -> list[str]:
    """The operator names inside a vertex name, in chain order.

    Flink names a vertex after its (chained) operators joined by ' -> ', prefixes sources with
    'Source: ' and suffixes sink-v2 writers with ': Writer'. Our job gives every operator its own
    slot-sharing group, so chains do not form, but tolerate them anyway.
    """
    names = []
    for part in vertex_name.split(" -> "):
        part = _SINK_SUFFIX.sub("", _SOURCE_PREFIX.sub("", part.strip())).strip()
        if part:
            names.append(part)
    return names


def map_vertices(vertices: Iterable[Vertex], operators: Iterable[str]) -> dict[str, str]:
    """operator name -> vertex id. A vertex whose chain contains an operator maps to it.

    Exact matches win over substring matches, so 'map' never grabs 'flat_map_x' when both exist.
    """
    ops = list(operators)
    vs = list(vertices)
    out: dict[str, str] = {}
    for op in ops:
        for v in vs:
            if op in vertex_operators(v.name):
                out[op] = v.id
                break
    for op in ops:
        if op in out:
            continue
        for v in vs:
            if v.id not in out.values() and any(op in part for part in vertex_operators(v.name)):
                out[op] = v.id
                break
    return out


# ------------------------------------------------------------------ parsing


def parse_job(data: dict[str, Any]) -> JobDetails:
    vertices = tuple(
        Vertex(
            id=str(v["id"]),
            name=str(v["name"]),
            parallelism=int(v.get("parallelism", 0)),
            status=str(v.get("status", "")),
            tasks={k: int(n) for k, n in (v.get("tasks") or {}).items()},
        )
        for v in data.get("vertices", [])
    )
    return JobDetails(
        jid=str(data["jid"]),
        name=str(data.get("name", "")),
        state=str(data.get("state", "")),
        vertices=vertices,
        start_time_ms=int(data.get("start-time", 0) or 0),
        timestamps={k: int(t) for k, t in (data.get("timestamps") or {}).items()},
    )


def parse_checkpoints(data: dict[str, Any]) -> CheckpointStats:
    counts = data.get("counts") or {}
    latest = data.get("latest") or {}
    done = latest.get("completed") or {}
    restored = latest.get("restored") or {}
    return CheckpointStats(
        completed=int(counts.get("completed", 0)),
        failed=int(counts.get("failed", 0)),
        in_progress=int(counts.get("in_progress", 0)),
        restored=int(counts.get("restored", 0)),
        latest_completed_id=done.get("id"),
        latest_completed_ms=done.get("latest_ack_timestamp"),
        latest_restored_id=restored.get("id"),
        latest_restored_ms=restored.get("restore_timestamp"),
        latest_state_bytes=done.get("state_size", done.get("checkpointed_size")),
    )


def parse_exceptions(data: dict[str, Any]) -> list[JobException]:
    entries = (data.get("exceptionHistory") or {}).get("entries") or []
    out = []
    for e in entries:
        out.append(
            JobException(
                timestamp_ms=int(e.get("timestamp", 0) or 0),
                name=str(e.get("exceptionName", "")),
                message=str(e.get("stacktrace", "")).splitlines()[0] if e.get("stacktrace") else "",
                task=e.get("taskName"),
                taskmanager=e.get("taskManagerId"),
            )
        )
    return out


# ------------------------------------------------------------------ client


class FlinkRest:
    def __init__(self, url: str, timeout: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout

    def _get(self, path: str) -> Any:
        r = requests.get(self.url + path, timeout=self.timeout)
        r.raise_for_status()
        return r.json()

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        """A call whose failure is an error for the caller (FlinkRestError with Flink's message)."""
        try:
            r = requests.request(method, self.url + path, json=body, timeout=self.timeout)
        except requests.RequestException as exc:
            raise FlinkRestError(f"{method} {path}: {exc}") from exc
        if r.status_code >= 400:
            raise FlinkRestError(f"{method} {path}: HTTP {r.status_code}: {r.text[:1000]}")
        try:
            return r.json() if r.content else {}
        except ValueError as exc:
            raise FlinkRestError(f"{method} {path}: not JSON: {r.text[:200]}") from exc

    # ---- cluster (used by the stack; these never raise) -----------------------------------------
    def overview(self) -> dict[str, Any] | None:
        """Cluster overview, or None while the REST endpoint is not up."""
        try:
            return self._get("/overview")
        except (requests.RequestException, ValueError):
            return None

    def taskmanager_ids(self) -> list[str]:
        """Resource ids of the task managers registered with the job manager ([] if unreachable)."""
        try:
            return [tm["id"] for tm in self._get("/taskmanagers").get("taskmanagers", [])]
        except (requests.RequestException, ValueError):
            return []

    def jobs(self) -> list[dict[str, Any]]:
        try:
            return list(self._get("/jobs/overview").get("jobs", []))
        except (requests.RequestException, ValueError):
            return []

    def jars(self) -> list[UploadedJar]:
        """The uploaded jars, newest first."""
        data = self._call("GET", "/jars")
        jars = [UploadedJar(str(f["id"]), str(f.get("name", "")), int(f.get("uploaded", 0)))
                for f in data.get("files", [])]
        return sorted(jars, key=lambda j: -j.uploaded_ms)

    def delete_jar(self, jar_id: str) -> None:
        """Remove an uploaded jar from the job manager's upload directory."""
        self._call("DELETE", f"/jars/{jar_id}")

    def upload_jar(self, jar: Path, name: str | None = None) -> str:
        """Upload `jar` (as `name`, default its file name); returns the id Flink gives it (the stored file name)."""
        if not jar.exists():
            raise JobSubmitError("job jar", f"{jar} does not exist")
        with open(jar, "rb") as f:
            r = requests.post(
                self.url + "/jars/upload",
                files={"jarfile": (name or jar.name, f, "application/x-java-archive")},
                timeout=120,
            )
        if r.status_code != 200:
            raise JobSubmitError("job jar", f"upload to {self.url} failed ({r.status_code}): {r.text[:500]}")
        return Path(r.json()["filename"]).name

    def run_jar(
        self, jar_id: str, main_class: str, args: list[str], savepoint: str | None = None,
        parallelism: int | None = None,
    ) -> str:
        """Run an uploaded jar; returns the job id."""
        body: dict[str, Any] = {"entryClass": main_class, "programArgsList": args}
        if savepoint:
            body["savepointPath"] = savepoint
            body["allowNonRestoredState"] = False
        if parallelism:
            body["parallelism"] = parallelism
        r = requests.post(f"{self.url}/jars/{jar_id}/run", json=body, timeout=180)
        if r.status_code != 200:
            raise JobSubmitError("flink job", f"submission failed ({r.status_code}): {r.text[:2000]}")
        return str(r.json()["jobid"])

    # ---- jobs -----------------------------------------------------------------------------------
    def taskmanagers(self) -> list[TaskManagerInfo]:
        data = self._call("GET", "/taskmanagers")
        return [
            TaskManagerInfo(id=str(t["id"]), slots=int(t.get("slotsNumber", 0)), free_slots=int(t.get("freeSlots", 0)))
            for t in data.get("taskmanagers", [])
        ]

    def active_job_ids(self) -> list[str]:
        """Jobs not in a terminal state, newest first."""
        jobs = [j for j in self.jobs() if j.get("state") not in TERMINAL_STATES]
        jobs.sort(key=lambda j: -int(j.get("start-time", 0) or 0))
        return [str(j["jid"]) for j in jobs]

    def job(self, jid: str) -> JobDetails:
        return parse_job(self._call("GET", f"/jobs/{jid}"))

    def vertex_taskmanagers(self, jid: str, vertex_id: str) -> list[str]:
        """Resource ids of the task managers running subtasks of a vertex."""
        data = self._call("GET", f"/jobs/{jid}/vertices/{vertex_id}/taskmanagers")
        return [str(t["taskmanager-id"]) for t in data.get("taskmanagers", []) if t.get("taskmanager-id")]

    def cancel(self, jid: str) -> None:
        self._call("PATCH", f"/jobs/{jid}?mode=cancel")

    # ---- rescaling ------------------------------------------------------------------------------
    def resource_requirements(self, jid: str) -> dict[str, Bounds]:
        data = self._call("GET", f"/jobs/{jid}/resource-requirements")
        return {
            vid: Bounds(int(r["parallelism"]["lowerBound"]), int(r["parallelism"]["upperBound"]))
            for vid, r in data.items()
        }

    def set_resource_requirements(self, jid: str, bounds: dict[str, Bounds]) -> None:
        """Adaptive scheduler: ask for new per-vertex parallelism bounds (FLIP-291)."""
        body = {vid: {"parallelism": {"lowerBound": b.lower, "upperBound": b.upper}} for vid, b in bounds.items()}
        self._call("PUT", f"/jobs/{jid}/resource-requirements", body)

    def stop_with_savepoint(self, jid: str, target_dir: str | None = None, drain: bool = False) -> str:
        """Trigger stop-with-savepoint; returns the trigger id to poll."""
        body: dict[str, Any] = {"drain": drain}
        if target_dir:
            body["targetDirectory"] = target_dir
        return str(self._call("POST", f"/jobs/{jid}/stop", body)["request-id"])

    def savepoint_status(self, jid: str, trigger_id: str) -> SavepointStatus:
        data = self._call("GET", f"/jobs/{jid}/savepoints/{trigger_id}")
        if (data.get("status") or {}).get("id") != "COMPLETED":
            return SavepointStatus(done=False)
        op = data.get("operation") or {}
        failure = op.get("failure-cause")
        if failure:
            return SavepointStatus(done=True, failure=str(failure.get("stack-trace", failure))[:2000])
        return SavepointStatus(done=True, location=op.get("location"))

    # ---- health ---------------------------------------------------------------------------------
    def checkpoints(self, jid: str) -> CheckpointStats:
        return parse_checkpoints(self._call("GET", f"/jobs/{jid}/checkpoints"))

    def exceptions(self, jid: str) -> list[JobException]:
        return parse_exceptions(self._call("GET", f"/jobs/{jid}/exceptions"))
