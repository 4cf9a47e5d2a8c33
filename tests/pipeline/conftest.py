"""The one Spark session of a test run (docs/design.md §8): local[2], loopback only, no UI.

Starting Spark costs ~10 s, so every pipeline test shares this session-scoped fixture and
none makes its own. Data dirs are generated per module or per test (datagen.py).
"""

from __future__ import annotations

import os
import sys

import pytest

#: The tests' data is tiny, so a fresh JVM spends more compiling than running: each new
#: query's Janino code and adaptive re-planning, and C2 compiling Spark itself on both
#: cores. Measured for this directory on the 2-core machine: 35-41 s with Spark's defaults,
#: 21-26 s with these. Production sessions keep the defaults, which pay off on real data.
SMALL_DATA_CONF = {
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
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


@pytest.fixture
def bookie_dir(tmp_path):
    """A data dir a real bookie wrote (RocksDB indexes included); each test gets its own."""
    import asyncio

    from tests.pipeline.datagen import write_bookie_data_dir

    data_dir = str(tmp_path / "bookie" / "data")
    asyncio.run(write_bookie_data_dir(data_dir))
    return data_dir
