"""The SparkSession of the pipeline: loopback settings locally, the data sources registered.

Local runs and tests keep every socket on 127.0.0.1 and start no UI (docs/design.md §8): the
driver's host and bind address, SPARK_LOCAL_IP for the JVM's own guess, and the Python
workers run this interpreter (PYSPARK_PYTHON), so executors import the same bookie code.
Against a cluster (``--master spark://...`` or spark-submit) the cluster's settings win:
only ``local`` masters get the loopback settings, and an existing session (spark-submit
creates one from its own flags) is reused as it is.
"""

from __future__ import annotations

import os
import sys

from pyspark import SparkConf
from pyspark.sql import SparkSession

from bookie.pipeline import sources

LOOPBACK = "127.0.0.1"
DEFAULT_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "8",
}
LOCAL_CONF = {
    "spark.driver.host": LOOPBACK,
    "spark.driver.bindAddress": LOOPBACK,
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    # Locally the JVM shares the cores with the Python workers, which do the pipeline's
    # work; C2 compiling and G1's threads took CPU from them in bursts. Measured on 2 cores:
    # a task's scrub of a 512 MiB log took 0.63-1.80 s with the defaults, 0.63-0.69 s (as
    # in a plain process) with these.
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
}


def loopback_environment() -> None:
    """Environment for a local JVM and its Python workers; set before the JVM starts."""
    os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def session(master: str | None = None, app_name: str = "bookie-pipeline",
            driver_memory: str | None = None, conf: dict[str, str] | None = None,
            ) -> SparkSession:
    """A session for ``master``: the flag, else what spark-submit was given, else local[*]."""
    # spark-submit starts the JVM first and hands its gateway to this process; its
    # --master and --conf flags are then already in the JVM's SparkConf.
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ
    effective = master or (SparkConf().get("spark.master", "local[*]") if submitted
                           else "local[*]")
    builder = SparkSession.builder.appName(app_name)
    if master is not None or not submitted:
        builder = builder.master(effective)
    settings = dict(DEFAULT_CONF)
    if effective.startswith("local"):
        loopback_environment()
        settings.update(LOCAL_CONF)
    if driver_memory:
        settings["spark.driver.memory"] = driver_memory
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    sources.register(spark)
    return spark
