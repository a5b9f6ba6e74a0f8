"""Log lines of the harness and the libraries it drives go to files, never to the console.

The console belongs to progress bars, tables and errors. Everything that logs -
the harness (`harness.*`), librdkafka through confluent-kafka (`harness.kafka`),
py4j and PySpark - logs through Python's `logging`; `log_to(path)` sends those
lines to a file for the length of a run or an analysis. Without it they are
dropped (a `NullHandler` keeps Python's last-resort handler from printing
warnings to stderr).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HARNESS = "harness"
KAFKA_CLIENT = "harness.kafka"  # librdkafka's lines (the `logger` of every confluent-kafka client)
LIBRARIES = ("py4j", "pyspark")
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

for _name in (HARNESS, *LIBRARIES):
    logging.getLogger(_name).addHandler(logging.NullHandler())


def kafka_client_logger() -> logging.Logger:
    """The logger to pass as confluent-kafka's `logger` setting, so librdkafka does not print to stderr."""
    logger = logging.getLogger(KAFKA_CLIENT)
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO)
    return logger


def kafka_client_config(conf: dict[str, Any]) -> dict[str, Any]:
    """`conf` for a confluent-kafka client whose librdkafka lines (`%3|...|FAIL|`, `%6|...|BGQUEUE|`) go to
    Python logging - the run's log file under `log_to` - instead of the process's stderr."""
    return {**conf, "logger": kafka_client_logger()}


@contextmanager
def log_to(path: Path, level: int = logging.INFO) -> Iterator[Path]:
    """Append the harness's and its libraries' log lines to `path` while the block runs."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter(FORMAT))
    handler.setLevel(level)
    loggers = [logging.getLogger(n) for n in (HARNESS, *LIBRARIES)]
    before = [lg.level for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        if lg.level == logging.NOTSET or lg.level > level:
            lg.setLevel(level)
    try:
        yield path
    finally:
        for lg, old in zip(loggers, before, strict=True):
            lg.removeHandler(handler)
            lg.setLevel(old)
        handler.close()
