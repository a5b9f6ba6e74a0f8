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
        (("query: q11", "query: q99"), "query: unknown query 'q99'; valid choices: q1"),
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
