"""The Spark session of an analysis: quiet, small, and quick to start.

Quiet: the driver JVM's stdout/stderr (start-up lines, log4j, JVM warnings) go
to the analysis log, with a log4j2 configuration of our own (warnings and
errors). Small: the driver only schedules tasks and collects a few rows per
run (the samples live in Python workers), so 1 GiB of heap and C1-compiled code
do. Quick: a class-data-sharing archive of the classes a session loads
(written by the first session on this machine, ~150 MB under
~/.cache/autoscaler-bench/spark-cds, see `harness.backends.local.cds`) halves
the JVM's start-up CPU - measured on this 2-core machine: 7 s instead of 14 s
for the session, 6-8 s instead of 11-15 s for the first job.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from harness.backends.local.cds import CdsPlan, ClassDataSharing

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

JVM_FLAGS = ["-XX:+UseParallelGC", "-XX:TieredStopAtLevel=1"]
DEFAULT_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    # the driver JVM only schedules tasks and passes back a few rows per run: the samples live in Python workers
    "spark.driver.memory": "1g",
    "spark.driver.extraJavaOptions": " ".join(JVM_FLAGS),
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # one Python worker per core, kept for every task: each imports numpy, pandas and pyarrow once
    "spark.python.worker.reuse": "true",
}

# log4j2 configuration for the driver JVM: warnings and errors to its stderr, which is the analysis log
LOG4J2 = """\
status = error
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{yyyy-MM-dd HH:mm:ss,SSS} %p %c{1}: %m%n%ex
"""
CDS_DIR = Path("~/.cache/autoscaler-bench/spark-cds").expanduser()


def _java() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    found = Path(home) / "bin" / "java" if home else (Path(w) if (w := shutil.which("java")) else None)
    return found if found is not None and found.exists() else None


def _cds_plan(flags: list[str]) -> tuple[ClassDataSharing, CdsPlan]:
    """Use the driver's archive if there is one, else write it when this JVM exits (`BENCH_SPARK_CDS=0`: off)."""
    import pyspark

    java = _java()
    cds = ClassDataSharing(CDS_DIR, enabled=java is not None and os.environ.get("BENCH_SPARK_CDS", "1") != "0")
    if java is None or not cds.enabled:
        return cds, CdsPlan([])
    cds.promote()  # archives earlier sessions wrote when their JVM exited
    return cds, cds.plan(java, "spark-driver", f"{Path(pyspark.__file__).parent}:{pyspark.__version__}", flags)


def _attach(plan: CdsPlan, pid: int, java: str, classpath: str, flags: list[str]) -> None:
    """Name the dumping JVM and how to check its archive (the launcher chose the classpath, not us)."""
    if plan.marker is None:
        return
    ClassDataSharing.attach(plan, pid)
    try:
        data = json.loads(plan.marker.read_text())
        data["check"] = [java, "-Xshare:on", f"-XX:SharedArchiveFile={data['part']}", *flags, "-cp", classpath,
                         "-version"]
        plan.marker.write_text(json.dumps(data))
    except (OSError, ValueError, KeyError):
        plan.marker.unlink(missing_ok=True)


def build_session(master: str = "local[*]", app: str = "bench-analysis", conf: dict[str, str] | None = None,
                  log_file: Path | None = None) -> SparkSession:
    """A session with a modest local footprint (no UI, a small driver).

    With `log_file`, the driver JVM this starts writes its stdout/stderr there
    (start-up banner, log4j lines, JVM warnings); a JVM already running in this
    process keeps whatever output it had.
    """
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    # Python workers (if any are ever needed) run this interpreter, not whatever `python3` is on PATH
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    settings = {**DEFAULT_CONF, **(conf or {})}
    if master.startswith("local"):
        # a local session listens on loopback only (Spark otherwise binds the host's first address)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        settings = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1", **settings}
    if SparkContext._gateway is None and log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        config = Path(tempfile.mkdtemp(prefix="bench-spark-")) / "log4j2.properties"
        config.write_text(LOG4J2)
        flags = settings.get("spark.driver.extraJavaOptions", "").split()
        cds, plan = _cds_plan(flags)
        settings["spark.driver.extraJavaOptions"] = " ".join(
            [*flags, *plan.flags, f"-Dlog4j2.configurationFile={config.as_uri()}"])
        spark_conf = SparkConf(loadDefaults=False).setMaster(master).setAppName(app).setAll(list(settings.items()))
        with log_file.open("ab") as out:
            gateway = launch_gateway(spark_conf, popen_kwargs={"stdout": out, "stderr": subprocess.STDOUT})
        sc = SparkContext(conf=spark_conf, gateway=gateway)
        if gateway.proc is not None and sc._jvm is not None:
            system = sc._jvm.System
            _attach(plan, gateway.proc.pid, str(Path(system.getProperty("java.home")) / "bin" / "java"),
                    system.getProperty("java.class.path"), flags)
        config.unlink(missing_ok=True)
        config.parent.rmdir()
    builder = SparkSession.builder.master(master).appName(app)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if log_file is None:
        spark.sparkContext.setLogLevel("ERROR")
    return spark


