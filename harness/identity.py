"""A run's configuration identity: which table cell a run record belongs to, and with which code.

The hash covers the fully resolved experiment (every default filled in) except the seed and the
repetition count: the repetitions of one cell share it, an edited cell gets another one
(DESIGN.md, run record). For a sim run it also covers the model files the simulator reads besides
the experiment (the query's topology and calibrated profile): a recalibration changes every sim
result without touching a field, and the run must not count as the same cell. `bench matrix`
compares the hash to decide whether a record still counts; analysis groups by it so two
configurations never share a table row.
"""

from __future__ import annotations

import functools
import hashlib
import json
import subprocess
import threading
from pathlib import Path
from typing import Any

from harness import __version__, yamlio

HASH_LENGTH = 12  # hex digits: plenty for the cells of one results directory, short enough to read
HASH_PREFIX = "c"  # a hash is never all digits, so no CSV reader takes it for a number
EXCLUDED = ("seed", "repetitions")  # what differs between the repetitions of one cell
# settings blocks a run of a backend never reads: editing them must not make its records stale
UNREAD_SETTINGS = {"sim": ("local", "k8s"), "local": ("sim",), "k8s": ("sim",)}


# settings added after records existed, at the value those records ran with: left out of the view while they hold
# it, so adding a knob does not make every earlier record stale (as an empty `faults` list, below)
LATER_SETTINGS: dict[tuple[str, str], Any] = {("local", "probe_reporter"): False}


MODEL_KEY = "model"  # where the model files' digests sit in the hashed view and in run.yaml's `identity:`


def identity_view(config: dict[str, Any], model: dict[str, str] | None = None) -> dict[str, Any]:
    """The part of a resolved config (an `Experiment.model_dump(mode="json")`) the hash covers.

    An empty `faults` list is left out: it is what every record written before faults existed meant; so is
    a setting of `LATER_SETTINGS` at the value the records before it ran with.
    So are the settings blocks of the backends the run does not use (a sim run never reads `k8s:`).
    `model` (from `model_inputs`) joins the view under `model` when the run reads any model file."""
    unread = UNREAD_SETTINGS.get(str(config.get("backend")), ())
    view = {k: v for k, v in config.items()
            if k not in EXCLUDED and k not in unread and not (k == "faults" and not v)}
    for (block, key), before in LATER_SETTINGS.items():
        settings = view.get(block)
        if isinstance(settings, dict) and key in settings and settings[key] == before:
            view[block] = {k: v for k, v in settings.items() if k != key}
    if model:
        view[MODEL_KEY] = dict(model)
    return view


def config_hash(config: dict[str, Any], model: dict[str, str] | None = None) -> str:
    """Stable short hash of a resolved config dict and its model files' digests (canonical JSON, sorted keys)."""
    text = json.dumps(identity_view(config, model), sort_keys=True, separators=(",", ":"), default=str)
    return HASH_PREFIX + hashlib.sha256(text.encode()).hexdigest()[:HASH_LENGTH]


def model_inputs(config: dict[str, Any]) -> dict[str, str]:
    """Digests of the files a run's model reads besides its config, by role; empty for a real backend.

    A sim run reads the query's topology (operators, first-guess costs, partitions) and, unless
    `sim.profile` is `first_guess`, the calibrated profile nearest its task managers' CPUs, named with
    its digest ("absent" when the query has none: a profile added later changes the run). Local and
    k8s runs measure the real system instead."""
    if config.get("backend") != "sim":
        return {}
    from harness.calibrated_profile import profile_path  # only sim identities read the model files
    from harness.topology import topology_path

    query = str(config.get("query"))
    out = {"topology": _file_digest(topology_path(query))}
    sim: dict[str, Any] = config["sim"] if isinstance(config.get("sim"), dict) else {}
    local: dict[str, Any] = config["local"] if isinstance(config.get("local"), dict) else {}
    if sim.get("profile", "calibrated") == "calibrated":
        cores = sim.get("taskmanager_cpu") or local.get("taskmanager_cpu_quota")  # as the sim backend picks them
        path = profile_path(query, float(cores) if cores else None)
        out["calibrated_profile"] = f"{path.name} {_file_digest(path)}" if path else "absent"
    return out


def _file_digest(path: Path) -> str:
    """Digest of a YAML file's content (comments and layout do not count); "absent" when there is none."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return "absent"
    return _content_digest(str(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=64)
def _content_digest(path: str, mtime_ns: int, size: int) -> str:
    """Parsed once per version of the file (mtime and size are part of the key): a matrix hashes every cell."""

    text = json.dumps(yamlio.load(Path(path).read_text()), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:HASH_LENGTH]


def experiment_hash(experiment: Any) -> str:
    """`config_hash` of a validated `Experiment`, with the model files it reads."""
    dump = experiment.model_dump(mode="json")
    return config_hash(dump, model_inputs(dump))


def recorded_model(meta: dict[str, Any]) -> dict[str, str]:
    """The model files' digests a run.yaml recorded (empty for real backends and for records before them)."""
    ident = meta.get("identity")
    model = ident.get(MODEL_KEY) if isinstance(ident, dict) else None
    return {str(k): str(v) for k, v in model.items()} if isinstance(model, dict) else {}


def recorded_hash(meta: dict[str, Any]) -> str | None:
    """The hash a run.yaml carries; older records without one get it recomputed from `config`."""
    ident = meta.get("identity")
    if isinstance(ident, dict) and isinstance(ident.get("config_hash"), str):
        return ident["config_hash"]
    config = meta.get("config")
    return config_hash(config, recorded_model(meta)) if isinstance(config, dict) else None


def differing_fields(old: Any, new: Any, prefix: str = "", *, old_model: dict[str, str] | None = None,
                     new_model: dict[str, str] | None = None) -> list[tuple[str, Any, Any]]:
    """Dotted paths whose values differ between two config dicts (seed and repetitions ignored).

    With the model files' digests of each side, a changed profile shows as `model.calibrated_profile`."""
    if prefix == "" and isinstance(old, dict) and isinstance(new, dict):
        old, new = identity_view(old, old_model), identity_view(new, new_model)
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[tuple[str, Any, Any]] = []
        for key in sorted(set(old) | set(new), key=str):
            path = f"{prefix}.{key}" if prefix else str(key)
            out += differing_fields(old.get(key, _ABSENT), new.get(key, _ABSENT), path)
        return out
    return [] if old == new else [(prefix or "(config)", old, new)]


class _Absent:
    def __repr__(self) -> str:
        return "(absent)"


_ABSENT = _Absent()


_GIT_STATUS = ("status", "--porcelain=v2", "--branch", "--untracked-files=no")
_git: subprocess.Popen[str] | None = None
_git_lock = threading.Lock()  # runs in threads share one question and one answer


def start_code_version() -> None:
    """Start asking git for the commit and the tree's edits in the background (one `git status`), so a run
    does not wait for it: `code_version` collects the answer when the record is written."""
    global _git
    with _git_lock:
        if _git is not None or code_version.cache_info().currsize:
            return
        root = Path(__file__).resolve().parents[1]
        try:
            _git = subprocess.Popen(["git", "-C", str(root), *_GIT_STATUS], stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True,
                                    start_new_session=True)  # a Ctrl-C stops the run, not this question
        except OSError:  # no git: the version alone
            _git = None


@functools.cache
def code_version() -> dict[str, Any]:
    """The harness version and, in a git checkout, the commit and whether the tracked files had edits."""
    global _git
    out: dict[str, Any] = {"harness": __version__}
    start_code_version()
    with _git_lock:
        proc = _git
        if proc is None:
            return out
        try:
            stdout, _ = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            return out
        finally:
            _git = None
    if proc.returncode != 0:  # not a checkout
        return out
    lines = stdout.splitlines()
    commit = next((ln.split()[2] for ln in lines if ln.startswith("# branch.oid ")), None)
    if commit and commit != "(initial)":
        out["git_commit"] = commit
        out["git_dirty"] = any(ln and not ln.startswith("#") for ln in lines)
    return out


def identity_block(experiment: Any) -> dict[str, Any]:
    """What the runner writes under `identity:` in run.yaml: the hash, the model files it covers, the code."""
    dump = experiment.model_dump(mode="json")
    model = model_inputs(dump)
    block: dict[str, Any] = {"config_hash": config_hash(dump, model)}
    if model:
        block[MODEL_KEY] = model
    block["code"] = code_version()
    return block
