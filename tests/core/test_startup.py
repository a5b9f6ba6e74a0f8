"""The import budget of the CLI: each command imports only what it uses (issue 13).

Each check runs the command in a fresh interpreter and reads `sys.modules` afterwards, so a stray
top-level import anywhere on the path (cli, config, record, a command module) fails here. The timings
themselves are a benchmark (benchmarks/bench_startup.py), not a test.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

# what no command but the ones that need it may import
HEAVY = ("pandas", "pyarrow", "scipy", "statsmodels", "matplotlib", "pyspark", "kubernetes", "confluent_kafka",
         "requests", "networkx", "prometheus_api_client", "numpy")

PROBE = """
import json, sys
from harness.cli import app
try:
    app(sys.argv[1:], prog_name="bench")
except SystemExit as exc:
    code = exc.code
else:
    code = 0
print(json.dumps({"code": code, "modules": sorted({m.split(".")[0] for m in sys.modules}), "all": sorted(sys.modules)}),
      file=sys.stderr)
"""


def _probe(*args: str) -> dict[str, object]:
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=300)
    report = json.loads(proc.stderr.strip().splitlines()[-1])
    assert report["code"] in (0, None), proc.stdout + proc.stderr
    return report


def imported_by(*args: str) -> set[str]:
    """Top-level packages imported by `bench ARGS...` in a fresh interpreter (which must exit 0)."""
    return set(_probe(*args)["modules"])  # type: ignore[arg-type]


def full_modules_of(*args: str) -> set[str]:
    """Every module (dotted names) imported by `bench ARGS...` in a fresh interpreter."""
    return set(_probe(*args)["all"])  # type: ignore[arg-type]


@pytest.mark.parametrize("args", [["--help"], ["-h"], ["--version"], ["run", "--help"], ["matrix", "--help"]])
def test_help_and_version_import_nothing_heavy(args: list[str]) -> None:
    loaded = imported_by(*args)
    assert "typer" in loaded  # the probe did run the CLI
    assert not loaded & set(HEAVY), f"bench {' '.join(args)} imported {sorted(loaded & set(HEAVY))}"


def test_help_loads_no_config_model_or_progress_machinery() -> None:
    """`bench --help` pays for typer and rich's console only: no pydantic (typer builds its validators only
    for a command it runs), no YAML, no progress bars or tables of the command modules."""
    loaded = imported_by("--help")
    modules = full_modules_of("--help")
    assert not loaded & {"pydantic", "yaml", "numpy", "logging", "tempfile"}, sorted(loaded)
    assert not modules & {"rich.progress", "rich.table", "rich.live"}, sorted(modules & {"rich.progress",
                                                                                         "rich.table"})


def test_list_imports_no_numpy_and_no_data_or_stack_library() -> None:
    loaded = imported_by("list")
    # the pattern and autoscaler config models live apart from their numpy implementations
    banned = {"numpy", "scipy", "statsmodels", "networkx", "pandas", "pyarrow", "matplotlib", "pyspark",
              "kubernetes", "confluent_kafka", "requests", "prometheus_api_client", "yaml"}
    assert not loaded & banned, sorted(loaded & banned)


def test_list_names_things_without_building_their_config_models() -> None:
    """Plain `bench list` prints names: the registries of names, no pattern or autoscaler config model (pydantic
    classes built at import), no autoscaler implementation, and no pydantic at all (typer's validators for its
    own --help / --install-completion / --show-completion flags are not built: cli._flags_off_unless_given)."""
    modules = full_modules_of("list")
    assert {"autoscalers", "workloads.pattern_names"} <= modules  # it did name them
    ours = {m for m in modules if m.startswith(("autoscalers.", "workloads."))}
    assert ours == {"workloads.pattern_names"}, sorted(ours)
    assert "rich._emoji_codes" not in modules  # plain text: no emoji table
    validators = {"pydantic", "pydantic_core", "annotated_types", "typing_inspection", "typer._adapters",
                  "importlib.metadata"}
    assert not modules & validators, sorted(modules & validators)


# what `bench list` may import beyond what `bench --help` does: the registries of names it prints
LIST_BEYOND_HELP = {"autoscalers", "harness.query_names", "workloads", "workloads.pattern_names"}


def test_list_imports_nothing_beyond_help_but_the_registries_of_names() -> None:
    """`bench list` costs what `bench --help` costs: any module it adds beyond the names it prints (a config
    model, pydantic, a command group, a YAML parser) is a regression of its start-up (issue 13)."""
    extra = full_modules_of("list") - full_modules_of("--help")
    assert extra <= LIST_BEYOND_HELP, sorted(extra - LIST_BEYOND_HELP)
    assert {"autoscalers", "workloads.pattern_names"} <= extra  # the probe did list


def test_typers_own_flags_still_act_when_given_and_options_are_still_validated() -> None:
    """Defaulting typer's --help / --show-completion flags to False (not None) keeps what they do."""
    assert "Usage: bench list [OPTIONS]" in subprocess.run(
        [sys.executable, "-m", "harness.cli", "list", "--help"], capture_output=True, text=True, check=True).stdout
    # under bash (not exec'd by it: a command follows), so typer detects the shell from the parent process
    shown = subprocess.run(["bash", "-c", f"{shlex.quote(sys.executable)} -m harness.cli --show-completion; exit $?"],
                           capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
    assert shown.returncode == 0 and "_BENCH_COMPLETE" in shown.stdout, shown.stdout + shown.stderr
    bad = subprocess.run([sys.executable, "-m", "harness.cli", "pattern", "cosine", "--seed", "x"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--seed" in bad.stderr and "integer" in bad.stderr, bad.stdout + bad.stderr


def test_the_pattern_names_are_the_pattern_models() -> None:
    from workloads.pattern_config import PARAMS
    from workloads.pattern_names import PATTERN_NAMES

    assert tuple(PARAMS) == PATTERN_NAMES


def test_list_details_imports_the_config_models_but_no_implementation() -> None:
    """`bench list --details` builds every autoscaler's and pattern's config model (pydantic) and reads each
    autoscaler's paper reference from its implementation's source: no numpy, scipy, statsmodels or networkx."""
    modules = full_modules_of("list", "--details")
    loaded = {m.split(".")[0] for m in modules}
    assert {"pydantic", "autoscalers.mpc.config", "workloads.pattern_config"} <= loaded | modules  # it did build them
    banned = {"numpy", "scipy", "statsmodels", "networkx", "pandas", "pyarrow", "matplotlib", "pyspark",
              "kubernetes", "confluent_kafka", "requests", "prometheus_api_client"}
    assert not loaded & banned, sorted(loaded & banned)
    implementations = {m for m in modules if m.endswith((".scaler", ".thresholds", ".spl", ".mead_models",
                                                         ".gesscale_model", ".forecast", ".search"))}
    assert implementations == set(), sorted(implementations)


def test_validate_imports_no_numpy(tmp_path: Path) -> None:
    """Validating an experiment builds the config models (pattern, arrivals, autoscaler, backends): none of
    them needs numpy, so `bench validate` does not load it."""
    exp = tmp_path / "e.yaml"
    exp.write_text("name: e\nbackend: sim\nquery: q11\nautoscaler: ds2\n"
                   "pattern: {name: cosine, arrivals: {kind: map}, spikes: {count: 1}}\n")
    loaded = imported_by("validate", str(exp))
    assert "pydantic" in loaded  # it did validate
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_a_sim_run_writes_and_summarises_its_record_without_pandas(tmp_path: Path) -> None:
    loaded = imported_by("run", "--backend", "sim", "--scaler", "static", "--query", "q1", "--pattern", "cosine",
                         "--duration", "600", "--results", str(tmp_path))
    assert "pyarrow" in loaded  # it did write a record
    banned = {"pandas", "matplotlib", "pyspark", "kubernetes", "confluent_kafka", "requests",
              "prometheus_api_client"}
    assert not loaded & banned, sorted(loaded & banned)
    assert list(tmp_path.rglob("timeseries.parquet"))


def test_the_benchmarked_ds2_sim_run_imports_no_pandas_scipy_or_arrow_compute(tmp_path: Path) -> None:
    """The run benchmarks/bench_startup.py times (ds2, q11, cosine; shortened here): DS2 is arithmetic, the
    record is written and summarised through harness.arrow, so no scipy/statsmodels/networkx, no pandas and
    none of pyarrow's compute, dataset or pandas layers."""
    modules = full_modules_of("run", "--backend", "sim", "--scaler", "ds2", "--query", "q11", "--pattern",
                              "cosine", "--duration", "600", "--results", str(tmp_path))
    assert "autoscalers.ds2" in modules and list(tmp_path.rglob("timeseries.parquet"))  # it did run and write
    tops = {m.split(".")[0] for m in modules}
    banned = {"pandas", "scipy", "statsmodels", "networkx", "matplotlib", "pyspark", "kubernetes", "confluent_kafka",
              "requests", "prometheus_api_client"}
    assert not tops & banned, sorted(tops & banned)
    arrow_layers = {"pyarrow.compute", "pyarrow.dataset", "pyarrow.pandas_compat"}
    assert not modules & arrow_layers, sorted(modules & arrow_layers)


def test_validate_imports_no_backend_implementation(tmp_path: Path) -> None:
    exp = tmp_path / "e.yaml"
    exp.write_text("name: e\nbackend: local\nquery: q1\npattern: cosine\nautoscaler: static\n"
                   "local: {port_offset: 7}\nk8s: {namespace: x}\n")
    probe = ("import sys; from harness.cli import app\n"
             "try: app(sys.argv[1:], prog_name='bench')\n"
             "except SystemExit: pass\n"
             "print(sorted(m for m in sys.modules if m.startswith('harness.backends')), file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", probe, "validate", str(exp)], capture_output=True, text=True,
                          timeout=300)
    assert "ok" in proc.stdout, proc.stdout + proc.stderr
    modules = eval(proc.stderr.strip().splitlines()[-1])  # noqa: S307 - our own probe's list literal
    configs = {"harness.backends.local.config", "harness.backends.sim.config", "harness.backends.k8s.config"}
    # the config models are imported (through the registry in harness.backends) and the modules that add
    # commands to `bench`; no backend implementation (stack, REST client, Kafka, Kubernetes client)
    assert configs <= set(modules)
    packages = {"harness.backends", "harness.backends.local", "harness.backends.sim", "harness.backends.k8s",
                "harness.backends.k8s.testcluster"}
    commands = {"harness.backends.local.commands", "harness.backends.k8s.commands",
                "harness.backends.k8s.testcluster.commands"}
    assert set(modules) - configs - packages - commands == set(), modules


def test_list_and_a_run_import_no_command_group_module(tmp_path: Path) -> None:
    """The command groups (`up`, `report`, `calibrate`, `k8s`, ...) are imported when one of their commands
    runs: `bench list` and `bench validate` pay for none of them, nor for the operator graphs' module."""
    from harness import cli

    exp = tmp_path / "e.yaml"
    exp.write_text("name: e\nbackend: sim\nquery: q11\nautoscaler: ds2\npattern: cosine\n")
    for args in (["list"], ["validate", str(exp)]):
        modules = full_modules_of(*args)
        groups = {m for m in modules if m in cli.COMMAND_GROUPS}
        assert groups == set(), (args, sorted(groups))
    assert "harness.topology" not in full_modules_of("list")
    assert {"harness.backends.local.commands"} <= full_modules_of("status", "--help")  # loaded for its command


def test_the_command_group_table_names_what_each_module_registers() -> None:
    import importlib

    import typer
    import typer.main

    from harness import cli

    for module, names in cli.COMMAND_GROUPS.items():
        scratch = typer.Typer()
        importlib.import_module(module).register(scratch)
        assert tuple(typer.main.get_group(scratch).commands) == names, module


def test_the_commands_are_listed_as_if_every_group_registered_on_the_app() -> None:
    """`bench --help` lists the commands in the order typer gives when every group module registers on the
    app at import (this module's, each group's, then the sub-groups); looking one up loads only its module."""
    import importlib

    import typer
    import typer.main

    from harness import cli

    eager = typer.Typer(**cli.APP_SETTINGS)
    eager.registered_commands.extend(cli.app.registered_commands)
    for module in cli.COMMAND_GROUPS:
        importlib.import_module(module).register(eager)
    expected = list(typer.main.get_group(eager).commands)
    lazy = typer.main.get_group(cli.app)
    assert "k8s" in expected and "up" in expected and "list" in expected
    assert list(lazy.commands) == expected
    assert lazy.list_commands(None) == expected  # type: ignore[arg-type]

    fresh = typer.main.get_group(cli.app)
    assert fresh.get_command(None, "calibrate").name == "calibrate"  # type: ignore[arg-type,union-attr]
    assert list(fresh.commands._loaded) == ["harness.calibration.commands"]  # type: ignore[attr-defined]
    assert fresh.get_command(None, "no-such-command") is None  # type: ignore[arg-type]
    assert set(fresh.commands._loaded) == set(cli.COMMAND_GROUPS)  # type: ignore[attr-defined]
