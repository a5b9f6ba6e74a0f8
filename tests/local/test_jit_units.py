"""The task managers' JIT mode reaches their JVM command line, and only theirs (no services needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.backends.local.config import LocalConfig, TaskManagerJit
from tests.local.offline_flink import offline_flink

C1_ONLY = "-XX:TieredStopAtLevel=1"


@pytest.mark.parametrize(("jit", "role", "c1_only"), [
    (TaskManagerJit.C1, "taskmanager", True),
    (TaskManagerJit.TIERED, "taskmanager", False),
    (TaskManagerJit.C1, "jobmanager", False),  # the job manager is not under a quota
])
def test_c1_only_is_asked_of_the_task_managers_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     jit: TaskManagerJit, role: str, c1_only: bool) -> None:
    flink, inst = offline_flink(LocalConfig(workdir=tmp_path, class_data_sharing=False, taskmanager_jit=jit),
                                tmp_path, monkeypatch, role)
    cmd, _ = flink.java_command(inst, role, tmp_path / "x.log", [])
    assert (C1_ONLY in cmd) is c1_only
    assert cmd.index("-classpath") > max((i for i, a in enumerate(cmd) if a.startswith("-XX:")), default=0)


def test_an_unknown_jit_mode_is_refused_with_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="'tiered' or 'c1'"):
        LocalConfig.model_validate({"taskmanager_jit": "c2"})
