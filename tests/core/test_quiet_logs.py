"""Quiet consoles: librdkafka's and the harness's log lines go to the run's log file, never to stderr."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

from harness.record import RUN_LOG
from harness.runner import run_experiment
from tests.core.fakes import FakeBackend
from tests.core.test_mape import experiment

# a Kafka admin client asking a port where nothing listens: librdkafka logs `%3|...|FAIL|` connection errors
_ADMIN = """
import sys
from pathlib import Path
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from harness.logs import kafka_client_config, log_to

conf = {{"bootstrap.servers": "127.0.0.1:1"}}
with log_to(Path(sys.argv[1])):
    admin = AdminClient({conf})
    try:
        admin.list_topics(timeout=1)
    except KafkaException:
        pass
    admin.poll(0)  # as the harness does after using a client: queued lines are handed to logging
"""


def _admin_stderr(tmp_path: Path, conf: str) -> tuple[str, str]:
    log = tmp_path / f"{conf.split('(')[0] or 'plain'}.log"
    proc = subprocess.run([sys.executable, "-c", _ADMIN.format(conf=conf), str(log)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stderr, log.read_text() if log.exists() else ""


def test_librdkafka_lines_go_to_the_log_file_not_the_console(tmp_path: Path):
    stderr, log = _admin_stderr(tmp_path, "kafka_client_config(conf)")
    assert "%3|" not in stderr and "rdkafka" not in stderr, stderr
    assert "FAIL" in log and "127.0.0.1:1" in log  # the lines are kept, in the file
    # without the harness's client settings the same client prints to stderr: the check above can fail
    plain_stderr, _ = _admin_stderr(tmp_path, "conf")
    assert "%3|" in plain_stderr and "FAIL" in plain_stderr


def test_a_run_keeps_its_log_lines_in_its_record(tmp_path: Path, capfd):
    class Chatty(FakeBackend):
        def start(self, *args, **kw):
            logging.getLogger("harness.kafka").warning("%6|1|BGQUEUE|rdkafka#producer-1| purging queue")
            return super().start(*args, **kw)

    run_dir = run_experiment(experiment(duration_s=60, loop={"period_s": 15, "cooldown_s": 0}),
                             tmp_path / "exp" / "run1", backend=Chatty())
    out, err = capfd.readouterr()
    assert "BGQUEUE" not in out + err
    assert "BGQUEUE" in (run_dir / RUN_LOG).read_text()
    assert sorted(p.name for p in (tmp_path / "exp").iterdir()) == ["run1"]  # the temporary log is gone
    # after the run the lines are no longer collected anywhere
    logging.getLogger("harness.kafka").warning("after the run")
    assert "after the run" not in (run_dir / RUN_LOG).read_text()
