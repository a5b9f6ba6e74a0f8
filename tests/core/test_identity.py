"""Config identity: repetitions share a hash, an edit changes it; `bench matrix` sees stale records."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from harness.cli import app
from harness.config import Experiment
from harness.identity import config_hash, differing_fields, experiment_hash, recorded_hash
from harness.record import find_run_dirs, read_run_record
from harness.summary import summarise

runner = CliRunner()

BASE = {"name": "x", "backend": "sim", "query": "q1", "pattern": {"name": "cosine"},
        "autoscaler": {"name": "ds2"}}


def exp(**over: object) -> Experiment:
    return Experiment.model_validate({**BASE, **over})


def test_hash_ignores_seed_and_repetitions_but_not_edits() -> None:
    a = experiment_hash(exp(seed=1))
    assert a == experiment_hash(exp(seed=7, repetitions=3))
    assert a != experiment_hash(exp(loop={"cooldown_s": 30}))
    assert a != experiment_hash(exp(faults=[{"kind": "kill-taskmanager", "at_s": 10}]))
    assert a.startswith("c") and not a.isdigit()


def test_hash_ignores_the_settings_of_backends_the_run_does_not_use() -> None:
    sim = experiment_hash(exp())
    assert sim == experiment_hash(exp(k8s={"namespace": "other"}, local={"port_offset": 500}))
    assert sim != experiment_hash(exp(sim={"step_s": 2.0}))
    local = {"backend": "local"}
    assert experiment_hash(exp(**local)) == experiment_hash(exp(**local, sim={"step_s": 2.0}))
    assert experiment_hash(exp(**local)) != experiment_hash(exp(**local, local={"taskmanager_cpu_quota": 0.5}))


def test_records_without_a_hash_get_it_from_their_config() -> None:
    e = exp(backend="local")
    dump = e.model_dump(mode="json")
    assert recorded_hash({"config": dump}) == experiment_hash(e)
    del dump["faults"]  # a record written before faults existed has the same identity
    assert config_hash(dump) == experiment_hash(e)
    # a sim record that does not say which model files it read is not a run of today's profile
    sim = exp()
    assert recorded_hash({"config": sim.model_dump(mode="json")}) != experiment_hash(sim)


def test_a_setting_added_later_keeps_the_identity_of_records_made_before_it_at_its_old_value() -> None:
    """`local.probe_reporter` came after local records existed: at False (how they ran) their hash stands, and
    a run with the probe on is another configuration."""
    e = exp(backend="local")
    dump = e.model_dump(mode="json")
    assert dump["local"]["probe_reporter"] is False
    del dump["local"]["probe_reporter"]  # a record written before the setting existed
    assert config_hash(dump) == experiment_hash(e)
    assert experiment_hash(exp(backend="local", local={"probe_reporter": True})) != experiment_hash(e)


def test_differing_fields_name_dotted_paths() -> None:
    old = exp().model_dump(mode="json")
    new = exp(loop={"cooldown_s": 30}, seed=5).model_dump(mode="json")
    assert differing_fields(old, new) == [("loop.cooldown_s", 300.0, 30.0)]


MATRIX = """
name: tiny
base: {backend: sim, query: q1, pattern: {name: cosine, time_scale: 20}, autoscaler: ds2, duration_s: 300,
       initial_parallelism: 2}
axes:
  autoscaler: [ds2, dhalion]
repetitions: 2
"""


def matrix(tmp_path: Path, *args: str) -> tuple[int, str]:
    m = tmp_path / "m.yaml"
    if not m.exists():
        m.write_text(MATRIX)
    res = runner.invoke(app, ["matrix", str(m), "--results", str(tmp_path / "r"), "--workers", "1", *args])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res.exit_code, res.output


def test_matrix_resume_counts_only_runs_of_the_same_configuration(tmp_path: Path) -> None:
    code, out = matrix(tmp_path)
    assert code == 0 and "4 ran" in out
    runs = find_run_dirs(tmp_path / "r")
    hashes = {read_run_record(r).meta["identity"]["config_hash"] for r in runs}
    assert len(hashes) == 2  # one per cell, shared by its repetitions
    assert all(read_run_record(r).meta["identity"]["code"]["harness"] for r in runs)  # the code version too
    before = {r: (r / "status").stat().st_mtime_ns for r in runs}

    # an edit: stop, name the stale runs and the field, write nothing
    code, out = matrix(tmp_path, "--set", "loop.cooldown_s=30")
    assert code == 2
    assert "4 run(s)" in out and "loop.cooldown_s: 300.0 -> 30.0" in out and "--rerun-stale" in out
    assert {r: (r / "status").stat().st_mtime_ns for r in runs} == before

    code, out = matrix(tmp_path, "--set", "loop.cooldown_s=30", "--dry-run")
    assert code == 0 and out.count("stale") >= 4 and "4 stale" in out

    # --only selects cells; --rerun-stale replaces just those
    code, out = matrix(tmp_path, "--set", "loop.cooldown_s=30", "--only", "autoscaler=ds2", "--rerun-stale")
    assert code == 0 and "2 ran" in out, out
    code, out = matrix(tmp_path, "--set", "loop.cooldown_s=30", "--dry-run")
    assert "2 done, 2 stale" in out
    cooldowns = sorted(read_run_record(r).meta["config"]["loop"]["cooldown_s"] for r in runs)
    assert cooldowns == [30.0, 30.0, 300.0, 300.0]


def test_raising_repetitions_after_an_edit_is_refused(tmp_path: Path) -> None:
    assert matrix(tmp_path)[0] == 0
    m = tmp_path / "m.yaml"
    raw = yaml.safe_load(m.read_text())
    raw["repetitions"] = 3
    raw["base"]["loop"] = {"cooldown_s": 30}
    m.write_text(yaml.safe_dump(raw))
    code, out = matrix(tmp_path)
    assert code == 2 and "loop.cooldown_s" in out
    code, out = matrix(tmp_path, "--dry-run")
    assert "2 to do" in out and "4 stale" in out


def test_only_naming_no_field_or_no_cell_is_bad_input(tmp_path: Path) -> None:
    code, out = matrix(tmp_path, "--only", "nosuch.field=1", "--dry-run")
    assert code == 2 and "--only nosuch.field" in out
    code, out = matrix(tmp_path, "--only", "autoscaler=hpa-cpu", "--dry-run")
    assert code == 2 and "selects none" in out
    code, out = matrix(tmp_path, "--only", "=x", "--dry-run")
    assert code == 2


def test_experiment_file_runs_all_its_repetitions_in_matrix_and_is_refused_by_run(tmp_path: Path) -> None:
    f = tmp_path / "e.yaml"
    f.write_text(yaml.safe_dump({**BASE, "name": "rep", "duration_s": 300, "repetitions": 3,
                                 "pattern": {"name": "cosine", "time_scale": 20}}))
    res = runner.invoke(app, ["run", str(f), "--results", str(tmp_path / "r")])
    assert res.exit_code == 2 and "bench matrix" in res.output and "repetitions" in res.output
    assert not (tmp_path / "r").exists()
    res = runner.invoke(app, ["matrix", str(f), "--results", str(tmp_path / "r"), "--workers", "1"])
    assert res.exit_code == 0, res.output
    assert sorted(read_run_record(r).meta["seed"] for r in find_run_dirs(tmp_path / "r")) == [1, 2, 3]


@pytest.fixture
def profiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the committed calibrated profiles that the sim and the run identity both read."""
    import shutil

    import harness.calibrated_profile as cp

    directory = tmp_path / "calibrated"
    shutil.copytree(cp.CALIBRATED_DIR, directory)
    monkeypatch.setattr(cp, "CALIBRATED_DIR", directory)
    return directory


def scale_capacities(profile: Path, factor: float) -> None:
    """A recalibration that measured every operator `factor` times faster (the file's only change)."""
    raw = yaml.safe_load(profile.read_text())
    for op in raw["operators"].values():
        op["capacity"] *= factor
        op["capacity_fit"]["cores_per_record"] /= factor
    profile.write_text(yaml.safe_dump(raw))


def test_a_sim_run_identity_covers_its_calibrated_profile_and_topology(profiles: Path) -> None:
    sim, first_guess, local = exp(), exp(sim={"profile": "first_guess"}), exp(backend="local")
    before = [experiment_hash(e) for e in (sim, first_guess, local)]
    text = (profiles / "q1.cpu-0.25.yaml").read_text()
    (profiles / "q1.cpu-0.25.yaml").write_text("# a comment is not a change\n" + text)
    assert [experiment_hash(e) for e in (sim, first_guess, local)] == before
    scale_capacities(profiles / "q1.cpu-0.25.yaml", 1.5)
    after = [experiment_hash(e) for e in (sim, first_guess, local)]
    assert after[0] != before[0]  # the sim reads the profile: another profile, another cell
    assert after[1:] == before[1:]  # first_guess never reads it; a local run measures the real system
    # a profile measured at 0.1 CPU: the sim of 0.1-CPU task managers now reads it, the 0.25-CPU one does not
    small = exp(local={"taskmanager_cpu_quota": 0.1})
    small_before = experiment_hash(small)
    (profiles / "q1.cpu-0.1.yaml").write_text(text.replace("cpu_quota: 0.25", "cpu_quota: 0.1"))
    assert experiment_hash(small) != small_before and experiment_hash(sim) == after[0]
    (profiles / "q1.cpu-0.25.yaml").unlink()
    (profiles / "q1.cpu-0.1.yaml").unlink()  # never calibrated is a state of its own, not "any profile"
    assert experiment_hash(sim) not in (before[0], after[0])


def test_matrix_resume_refuses_runs_of_another_calibrated_profile(tmp_path: Path, profiles: Path) -> None:
    """The seam end to end: profile -> identity in run.yaml -> matrix classification -> rerun -> records."""
    code, out = matrix(tmp_path)
    assert code == 0 and "4 ran" in out
    runs = find_run_dirs(tmp_path / "r")
    model = read_run_record(runs[0]).meta["identity"]["model"]
    assert set(model) == {"topology", "calibrated_profile"} and "absent" not in model.values()
    assert model["calibrated_profile"].startswith("q1.cpu-0.25.yaml ")  # the profile of the runs' 0.25 CPU
    tm_before = {r: summarise(read_run_record(r)).avg_tm for r in runs}

    scale_capacities(profiles / "q1.cpu-0.25.yaml", 3.0)
    code, out = matrix(tmp_path)
    assert code == 2 and "4 run(s)" in out and "model.calibrated_profile:" in out, out
    assert "--rerun-stale" in out
    assert {r: read_run_record(r).meta["identity"]["model"] for r in runs} == {r: model for r in runs}

    code, out = matrix(tmp_path, "--rerun-stale")
    assert code == 0 and "4 ran" in out, out
    new_model = read_run_record(runs[0]).meta["identity"]["model"]
    assert new_model["calibrated_profile"] != model["calibrated_profile"]
    assert new_model["topology"] == model["topology"]
    tm_after = {r: summarise(read_run_record(r)).avg_tm for r in runs}
    assert sum(tm_after.values()) < sum(tm_before.values())  # 3x faster operators need fewer task managers
    assert matrix(tmp_path, "--dry-run")[1].count("stale") == 0


def test_code_version_names_the_checkout_commit_and_its_edits() -> None:
    """One background `git status` answers both: the commit (`git rev-parse HEAD`) and whether tracked files
    differ from it (`git status --porcelain`), as the record's `identity.code` states them."""
    import subprocess

    from harness import identity

    root = str(Path(identity.__file__).resolve().parents[1])
    head = subprocess.run(["git", "-C", root, "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("not a git checkout")
    identity.code_version.cache_clear()
    identity.start_code_version()
    version = identity.code_version()
    edits = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    assert version["git_commit"] == head.stdout.strip()
    assert version["git_dirty"] is bool(edits)
    assert identity.code_version() is version  # asked once per process
