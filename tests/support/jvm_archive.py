"""A class-data archive of Spark's classes for the test run's JVMs, made once per install.

Most JVMs of a run live seconds: every command-line test starts one, and so does every
application on the test cluster. Each spends most of its start loading and verifying
Spark's classes. The JVM can map classes it archived at an earlier exit instead
(``-XX:SharedArchiveFile``, JDK 13+): a session starts in about 4 s instead of 9 s on
2 cores. :func:`ensure_archive` writes the archive, once per Java, Spark install and
options, by running a short Spark program (a load, a query, a sweep) that exits
normally; every later JVM of the run maps it. A JVM whose class path does not match
the archive's, or that finds none, starts as it would without (its CDS warnings are
off), so the archive changes no result, only start times.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

__all__ = ["BASE_OPTIONS", "archive_path", "ensure_archive", "jvm_options"]

BASE_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""The client compiler only and the serial collector: about 20% less CPU to start a JVM on
2 cores, and the run's long-lived session is no slower."""

_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"  # no warning when the archive does not match

_WARM_UP = """
import sys, tempfile
from pathlib import Path
import treestore
from loaders import load_job, run_load
from loaders.sweep.driver import interval_sweep
from shell.demo import DEMO_OPS, DEMO_PATH, write_demo_inputs
from treestore.spark import get_session

spark = get_session()
folder = Path(tempfile.mkdtemp(prefix="treestore-jvm-archive-"))
write_demo_inputs(folder)
run_load(spark, load_job(folder / "job.json"), folder / "store")
handle = treestore.open(folder / "store", spark=spark)
handle.local_limit = -1
handle.query(DEMO_PATH, rops=DEMO_OPS).to_arrow()
events = spark.createDataFrame([(1, 5), (2, 7)], "id long, time long")
intervals = spark.createDataFrame([(1, 0, 9, 3)], "id long, start long, end long, points long")
for plan in ("broadcast", "range"):
    interval_sweep(spark, events, intervals, plan=plan).write.parquet(str(folder / plan))
spark.read.parquet(str(folder / "range")).toArrow()
spark.stop()
"""


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _stamp(path: Path) -> str:
    """A file's path, size and time: a new install of it makes a new archive."""
    found = path.stat()
    return f"{path} {found.st_size} {found.st_mtime_ns}"


def archive_path() -> Path:
    """Where the archive for this Java, Spark install and options lives (in the venv). The
    Java install is known by its binary: no JVM starts to ask (``make test-fast`` starts
    none)."""
    java = shutil.which("java")
    stamps = [_stamp(Path(java).resolve()) if java else "", BASE_OPTIONS]
    stamps += [_stamp(jar) for jar in sorted((_spark_home() / "jars").glob("*.jar"))]
    key = hashlib.sha256("\n".join(stamps).encode()).hexdigest()[:16]
    return Path(sys.prefix) / "treestore-test-jvm" / f"spark-{key}.jsa"


def jvm_options(archive: Path) -> str:
    """The run's Java options: :data:`BASE_OPTIONS` and the archive (used when it exists)."""
    return f"{BASE_OPTIONS} -XX:SharedArchiveFile={archive} {_QUIET}"


def ensure_archive(archive: Path, seconds: float = 300) -> None:
    """Write ``archive`` if it does not exist: run the warm-up program under spark-submit
    (its JVM writes the archive as it exits) into a new file, then move it in place. A
    failure leaves no archive (the run goes on without it) and says nothing: the tests
    that need Spark say what is wrong with it."""
    if archive.exists():
        return
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_suffix(f".{os.getpid()}.partial")
    script = archive.parent / f"warm_up.{os.getpid()}.py"  # two workers may both write one
    script.write_text(_WARM_UP)
    env = {
        **os.environ,
        "SPARK_SUBMIT_OPTS": f"{BASE_OPTIONS} -XX:ArchiveClassesAtExit={partial} {_QUIET}",
        "PYSPARK_PYTHON": sys.executable,
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
    }
    submit = _spark_home() / "bin" / "spark-submit"
    try:
        done = subprocess.run(
            [str(submit), "--master", "local[2]", str(script)],
            env=env,
            capture_output=True,
            timeout=seconds,
            check=False,
        )
        if done.returncode == 0 and partial.exists():
            os.replace(partial, archive)
    except (OSError, subprocess.TimeoutExpired):
        pass
    finally:
        partial.unlink(missing_ok=True)
        script.unlink(missing_ok=True)
