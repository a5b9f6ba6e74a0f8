import pytest

from harness.config import ConfigError, load_any, load_experiment, load_matrix

GOOD = """
name: e1
backend: sim
query: q11
pattern: {name: cosine, scale: 0.5}
autoscaler: {name: static}
initial_parallelism: {bids_source: 2}
"""


def write(tmp_path, text, name="x.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_good_experiment(tmp_path):
    exp = load_experiment(write(tmp_path, GOOD))
    assert exp.initial_parallelism_map() == {"bids_source": 2, "session_window": 1, "sink": 1}
    assert exp.loop.period_s == 15 and exp.loop.cooldown_s == 300
    assert exp.scale_manager.max_taskmanagers == 80 and exp.scale_manager.max_increase_per_action == 15


@pytest.mark.parametrize(
    "replace, needle",
    [
        (("query: q11", "query: q99"), "query: unknown query 'q99'; valid choices: hotspot, q1"),
        (("name: static", "name: nope"), "autoscaler.name: unknown autoscaler 'nope'; valid choices:"),
        (("name: cosine", "name: sine"), "pattern.name"),
        (("scale: 0.5", "scale: -1"), "pattern.scale"),
        (("name: cosine,", "name: cosine, params: {min_rate: -3},"), "params.min_rate"),
        (("{name: static}", "{name: static, params: {foo: 1}}"), "params.foo: unknown field"),
        (("backend: sim", "backend: sim\nbogus: 1"), "bogus: unknown field; valid fields:"),
        (("{bids_source: 2}", "{nope: 2}"), "not in q11"),
        (("{bids_source: 2}", "two"), "initial_parallelism"),
    ],
)
def test_bad_experiments_name_file_and_field(tmp_path, replace, needle):
    path = write(tmp_path, GOOD.replace(*replace))
    with pytest.raises(ConfigError) as exc:
        load_experiment(path)
    assert str(path) in str(exc.value)
    assert needle in str(exc.value)


def test_missing_and_broken_files(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        load_experiment(tmp_path / "none.yaml")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_experiment(write(tmp_path, "a: [1, 2"))


MATRIX = """
name: m
base:
  backend: sim
  query: q1
  pattern: cosine
  autoscaler: ds2
axes:
  query: [q1, q11]
  autoscaler: [static, {name: ds2, params: {overprovisioning_factor: 1.4}}]
overrides:
  - match: {query: q11}
    set: {initial_parallelism: 10}
repetitions: 2
"""


def test_matrix_product_overrides_and_seeds(tmp_path):
    m, cells = load_matrix(write(tmp_path, MATRIX))
    assert len(cells) == 2 * 2 * 2
    q11 = [c for c in cells if c.experiment.query == "q11"]
    assert all(c.experiment.initial_parallelism == 10 for c in q11)
    assert all(c.experiment.initial_parallelism == 1 for c in cells if c.experiment.query == "q1")
    seeds = sorted({c.experiment.seed for c in cells})
    assert seeds == [1, 2]
    assert len({c.run_id for c in cells}) == len(cells)


def test_matrix_duplicate_cells_are_an_error(tmp_path):
    with pytest.raises(ConfigError, match="two cells"):
        load_matrix(write(tmp_path, MATRIX.replace("[q1, q11]", "[q1, q1]")))


def test_matrix_cell_error_names_the_cell(tmp_path):
    bad = MATRIX.replace("[q1, q11]", "[q1, q42]")
    with pytest.raises(ConfigError) as exc:
        load_matrix(write(tmp_path, bad))
    assert "q42" in str(exc.value) and "cell" in str(exc.value)


def test_experiment_repetitions_become_cells(tmp_path):
    _, cells = load_any(write(tmp_path, GOOD + "repetitions: 3\nseed: 7\n"))
    assert [c.experiment.seed for c in cells] == [7, 8, 9]


# ---------------------------------------------------------------- include (presets)

PRESET = """
base:
  backend: sim
  rescale_method: savepoint
  kafka: {partitions: 80, retention_s: 300}
  sim: {taskmanager_cpu: 1.0}
overrides:
  - match: {autoscaler: hpa-cpu}
    set: {autoscaler.params.cpu_target: 0.6}
"""

INCLUDING = """
name: m
include: presets/p.yaml
base:
  query: q1
  pattern: {name: cosine}
  autoscaler: ds2
  kafka: {retention_s: 60}
axes:
  autoscaler: [ds2, hpa-cpu]
overrides:
  - match: {autoscaler: hpa-cpu}
    set: {autoscaler.params.cpu_target: 0.8}
"""


def test_include_merges_a_preset_under_the_matrix(tmp_path):
    (tmp_path / "presets").mkdir()
    write(tmp_path / "presets", PRESET, "p.yaml")
    _, cells = load_matrix(write(tmp_path, INCLUDING))
    ds2, hpa = (c.experiment for c in cells)
    assert ds2.backend == "sim" and ds2.rescale_method == "savepoint" and ds2.sim.taskmanager_cpu == 1.0
    assert ds2.kafka.partitions == 80 and ds2.kafka.retention_s == 60  # the file's own value wins
    assert hpa.autoscaler.params["cpu_target"] == 0.8  # the file's overrides come after the preset's


def test_include_errors_name_the_file(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        load_matrix(write(tmp_path, INCLUDING))
    (tmp_path / "presets").mkdir()
    write(tmp_path / "presets", "include: ../x.yaml\n", "p.yaml")
    with pytest.raises(ConfigError, match="includes itself"):
        load_matrix(write(tmp_path, INCLUDING.replace("presets/p.yaml", "presets/p.yaml"), "x.yaml"))


def test_thesis_matrices_use_the_thesis_preset():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "experiments"
    for name in ("thesis-1-parameters", "thesis-2-workloads", "thesis-3-queries", "thesis-4-convergence"):
        _, cells = load_matrix(root / f"{name}.yaml")
        for c in cells:
            e = c.experiment
            assert e.partitions == 80 and e.kafka.retention_s == 300 and e.kafka.retention_check_s == 5
            assert e.rescale_method == "savepoint" and e.sim.startup_inside_downtime
            assert e.scale_manager.max_taskmanagers == 80 and e.scale_manager.max_increase_per_action == 15
            assert e.loop.period_s == 15 and e.loop.metrics_window_s == 15
            if e.autoscaler.name in ("hpa-cpu", "hpa-varga"):
                assert e.autoscaler.params["tolerance"] == 0.0


def test_backend_settings_are_registered_by_name_and_validated_by_their_model():
    """harness.config imports no backend module: each `backend:` name has its settings model registered."""
    from typing import get_args

    from harness.backends import BACKENDS
    from harness.backends.k8s.config import K8sConfig
    from harness.backends.local.config import LocalConfig
    from harness.backends.sim.config import SimConfig
    from harness.config import BACKEND_SETTINGS, ConfigError, Experiment, backend_settings_model, validate_model

    assert set(get_args(Experiment.model_fields["backend"].annotation)) == set(BACKEND_SETTINGS) == set(BACKENDS)
    assert [backend_settings_model(b) for b in ("local", "sim", "k8s")] == [LocalConfig, SimConfig, K8sConfig]
    raw = {"name": "x", "query": "q1", "pattern": {"name": "cosine"}, "autoscaler": {"name": "static"},
           "local": {"port_offset": 7}}
    exp = validate_model(Experiment, raw, "f.yaml")
    assert isinstance(exp.local, LocalConfig) and exp.local.port_offset == 7
    assert isinstance(exp.sim, SimConfig) and isinstance(exp.k8s, K8sConfig)
    assert exp.model_dump(mode="json")["local"]["port_offset"] == 7
    with pytest.raises(ConfigError) as err:
        validate_model(Experiment, {**raw, "local": {"bogus": 1}}, "f.yaml")
    assert "f.yaml: local.bogus: unknown field; valid fields: workdir," in str(err.value)
