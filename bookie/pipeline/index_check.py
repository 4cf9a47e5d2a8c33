"""The index-check job: the RocksDB locations against the scanned entry logs, both ways.

``bookie shell export-index`` writes the locations (Parquet or JSON lines); this job reads
them beside the logs' entries and reports what either side lacks (docs/pipeline.md "Jobs").
"""

from __future__ import annotations

import posixpath

import pyarrow.fs as pafs
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from bookie.pipeline import fs
from bookie.pipeline.jobs import (INDEX_COLUMNS, INDEX_SCHEMA, SIZE_FIELD_BYTES, JobResult, _out,
                                  _report, counted, read_entries)


def read_index(spark: SparkSession, path: str) -> DataFrame:
    """The exported locations: Parquet with int64 ledgerId, entryId, logId, pos, or
    newline-delimited JSON objects with those keys (``bookie shell export-index``)."""
    if _index_format(path) == "parquet":
        frame = spark.read.parquet(path)
    else:
        frame = spark.read.schema(INDEX_SCHEMA).json(path)
    missing = [name for name in INDEX_COLUMNS if name not in frame.columns]
    if missing:
        raise ValueError(f"{path}: the index export lacks columns {missing}")
    return frame.select(*[F.col(name).cast("long") for name in INDEX_COLUMNS])


def _index_format(path: str) -> str:
    filesystem, inner, _ = fs.split_uri(path)
    info = filesystem.get_file_info(inner)
    names = [info.base_name]
    if info.type == pafs.FileType.Directory:
        names = [item.base_name for item in filesystem.get_file_info(
            pafs.FileSelector(inner, recursive=True)) if item.type == pafs.FileType.File]
    if any(name.endswith(".parquet") for name in names):
        return "parquet"
    if any(name.endswith((".json", ".jsonl", ".ndjson")) for name in names):
        return "json"
    with filesystem.open_input_stream(inner if info.type == pafs.FileType.File
                                      else posixpath.join(inner, names[0])) as stream:
        return "parquet" if stream.read(4) == b"PAR1" else "json"


MISMATCH_PROBLEMS = ("missing-from-index", "missing-from-logs", "log-missing")
UNINDEXED_LEDGER = "ledger-not-in-index"
MISMATCH_COLUMNS = ("kind", "ledgerId", "entryId", "logId", "pos", "path", "copies",
                    "detail")


def index_mismatches(entries: DataFrame, index: DataFrame,
                     scanned_log_ids: list[int]) -> DataFrame:
    """Entries missing from either side, with ``kind``:

        missing-from-index   a log holds the entry, the index has no key for it, though it
                             has keys of that ledger: a read of it would get ENOENTRY
        missing-from-logs    the index points at (logId, pos) and no such entry starts
                             there; ``copies`` counts the entry's copies elsewhere
        log-missing          the index points into a log that was not scanned
        ledger-not-in-index  one row per ledger (``copies`` = its entries in the logs) that
                             the index has no key of: a deleted ledger's entries waiting
                             for GC, or a lost index; not counted as a problem
    A log copy the index does not point at, while another copy matches, is superseded
    (replay re-adds entries, docs/formats.md §8.3): not reported.
    """
    logs = entries.where(F.col("ledgerId").isNotNull()).select(
        "ledgerId", "entryId", "logId", (F.col("offset") + SIZE_FIELD_BYTES).alias("pos"),
        "path", F.lit(1).alias("side"))
    pointed = index.select(*INDEX_COLUMNS, F.lit(None).cast("string").alias("path"),
                           F.lit(0).alias("side"))
    # Aggregations instead of joins: the logs' rows are shuffled once, by location.
    per_location = logs.unionByName(pointed).groupBy(*INDEX_COLUMNS).agg(
        F.max(F.col("side") == 0).alias("indexed"), F.sum("side").alias("copies"),
        F.first("path", ignorenulls=True).alias("path"))
    here = F.col("copies") > 0
    per_entry = per_location.groupBy("ledgerId", "entryId").agg(
        F.max("indexed").alias("inIndex"), F.max(F.col("indexed") & here).alias("matched"),
        F.sum("copies").alias("copies"),
        F.max(F.when(F.col("indexed"), F.col("logId"))).alias("indexLogId"),
        F.max(F.when(F.col("indexed"), F.col("pos"))).alias("indexPos"),
        F.min(F.when(here, F.struct("logId", "pos", "path"))).alias("copy"))
    indexed_ledgers = index.select("ledgerId").distinct().withColumn("ledgerIndexed",
                                                                     F.lit(True))
    missing = per_entry.where(~F.col("matched")).join(indexed_ledgers, "ledgerId", "left")
    return _classified(missing, scanned_log_ids)


def _classified(missing: DataFrame, scanned_log_ids: list[int]) -> DataFrame:
    # One aggregation, not a union of two branches: a branch would scan the logs again.
    # Entries of unindexed ledgers share the group (kind, ledgerId, null); every other
    # group is one entry, whose values pass through min() unchanged.
    in_logs_only = ~F.col("inIndex")
    kind = (F.when(in_logs_only & F.col("ledgerIndexed").isNull(), UNINDEXED_LEDGER)
            .when(in_logs_only, "missing-from-index")
            .when(~F.col("indexLogId").isin(scanned_log_ids), "log-missing")
            .otherwise("missing-from-logs"))
    per_ledger = F.col("kind") == UNINDEXED_LEDGER
    rows = missing.select(
        kind.alias("kind"), "ledgerId", "copies", F.col("copy.path").alias("path"),
        F.when(per_ledger, F.lit(None)).otherwise(F.col("entryId")).alias("entryId"),
        F.when(in_logs_only, F.col("copy.logId")).otherwise(F.col("indexLogId")).alias(
            "logId"),
        F.when(per_ledger, F.lit(None)).when(in_logs_only, F.col("copy.pos"))
        .otherwise(F.col("indexPos")).alias("pos"))
    grouped = rows.groupBy("kind", "ledgerId", "entryId").agg(
        F.min("logId").alias("logId"), F.min("pos").alias("pos"),
        F.min("path").alias("path"), F.sum("copies").alias("copies"))
    detail = (F.when(per_ledger, F.format_string(
        "%d entries in the logs; the index has no key of this ledger", "copies"))
              .when(F.col("kind") == "missing-from-index", F.format_string(
                  "log %d pos %d holds it; the index has no key", "logId", "pos"))
              .otherwise(F.format_string(
                  "the index points at log %d pos %d; %d copies in the scanned logs",
                  "logId", "pos", "copies")))
    return grouped.withColumn("detail", detail).select(*MISMATCH_COLUMNS)


def run_index_check(spark: SparkSession, paths: list[str], index_path: str,
                    out: str | None = None) -> JobResult:
    """The logs scanned once, the index read once; one Spark action."""
    files = fs.list_files(paths, fs.LOG_KIND)
    entries, entries_seen = counted(read_entries(spark, paths), "entries",
                                    F.count("ledgerId"))  # not the rows of file problems
    mismatches = index_mismatches(entries, read_index(spark, index_path),
                                  sorted({ref.file_id for ref in files}))
    rows, outputs = _report(mismatches.select(*MISMATCH_COLUMNS),
                            _out(out, "index-check"))
    rows.sort(key=lambda row: (row["kind"], row["ledgerId"], row["entryId"] or -1))
    counts = {kind: sum(1 for row in rows if row["kind"] == kind)
              for kind in (*MISMATCH_PROBLEMS, UNINDEXED_LEDGER)}
    problems = sum(counts[kind] for kind in MISMATCH_PROBLEMS)
    summary = {"logs": len(files), "bytes": sum(ref.size for ref in files),
               "entries": entries_seen.get["entries"], "index": index_path, **counts}
    return JobResult("index-check", problems, summary, rows, outputs)
