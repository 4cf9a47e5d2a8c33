"""The one Spark session of a test run (DESIGN.md §8): local[2], loopback only, no UI.

Starting Spark costs ~10 s, so every pipeline test shares this session-scoped fixture and
none makes its own. Data dirs are generated per module or per test (datagen.py).
"""

from __future__ import annotations

import os
import sys

import pytest

#: The tests' data is tiny, so a fresh JVM spends more compiling each new query (Janino,
#: adaptive re-planning) than running it: measured 36 s against 41-46 s for this directory
#: on the 2-core machine. Production sessions keep Spark's defaults.
SMALL_DATA_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}


@pytest.fixture(scope="session")
def spark():
    # Before the JVM starts: it reads these from the environment, the workers too.
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from bookie.pipeline.spark import session

    spark = session("local[2]", app_name="bookie-pipeline-tests", driver_memory="1g",
                    conf={"spark.driver.host": "127.0.0.1",
                          "spark.driver.bindAddress": "127.0.0.1",
                          "spark.ui.enabled": "false", **SMALL_DATA_CONF})
    spark.sparkContext.setLogLevel("ERROR")
    yield spark
    spark.stop()


@pytest.fixture(scope="module")
def damaged_dir(tmp_path_factory):
    """A data dir with known damage (datagen.generate); tests must not modify it."""
    from tests.pipeline.datagen import generate

    return generate(str(tmp_path_factory.mktemp("pipeline") / "data"))
