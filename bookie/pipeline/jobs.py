"""The pipeline's jobs: DataFrame functions, and one ``run_*`` per job for the CLI.

Each job is a pure DataFrame function (testable on any DataFrame with the right columns)
plus a runner that reads the files, runs as few Spark actions as the job allows and returns
a ``JobResult``: a summary, a few example rows and whether problems were found.

    scrub        every entry's framing and digest; problem rows to a report
    usage        bytes per ledger per log from the ledgersMap trailers, joined with the
                 live ledgers: garbage ratio per log and compaction candidates
    export       entries (optionally with their bytes) to Parquet, partitioned by ledger
    index-check  the RocksDB locations (as ``bookie shell export-index`` writes them) against
                 the scanned logs, both ways: ``index_check.py``

Actions are the cost that matters at this size (docs/design.md §8: ~0.3 s per Spark job, ~30 ms
per Python task, a 1 GiB log per task): scrub and index-check scan the logs once, usage
reads only trailers, export writes in the same pass that scans.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import posixpath
import urllib.parse
import urllib.request

from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.window import Window
from pyspark.sql.types import LongType, StructField, StructType

from bookie.entry import DigestType
from bookie.pipeline import batches, fs
from bookie.pipeline.defaults import MAJOR_THRESHOLD, MINOR_THRESHOLD
from entrylog.reader import EntryLogReader
from ledgerindex.ledgers import LedgerMetadataIndex

INDEX_COLUMNS = ("ledgerId", "entryId", "logId", "pos")
INDEX_SCHEMA = StructType([StructField(name, LongType(), True) for name in INDEX_COLUMNS])
SIZE_FIELD_BYTES = batches.SIZE_FIELD_BYTES
LEDGERS_PAGE_LIMIT = 10_000
LEDGERS_PAGES_MAX = 100_000
HTTP_TIMEOUT_S = 30
_UNVERIFIABLE = (DigestType.MAC, DigestType.DUMMY)


@dataclasses.dataclass
class JobResult:
    """What a job found: ``problems`` > 0 makes the CLI exit non-zero. ``rows``: the
    report (scrub's bad entries, index-check's mismatches, usage's logs)."""

    job: str
    problems: int
    summary: dict
    rows: list[dict] = dataclasses.field(default_factory=list)
    outputs: dict[str, str] = dataclasses.field(default_factory=dict)


# ----------------------------------------------------------------------- reading

def _paths_option(paths: list[str]) -> str:
    return json.dumps(list(paths))


def read_entries(spark: SparkSession, paths: list[str], *, payload: bool = False,
                 verify: bool = False, problems_only: bool = False,
                 unverified: list[int] | None = None, tally: bool = False) -> DataFrame:
    return (spark.read.format("bkentrylog").option("paths", _paths_option(paths))
            .option("payload", str(payload).lower()).option("verify", str(verify).lower())
            .option("problemsOnly", str(problems_only).lower())
            .option("tally", str(tally).lower())
            .option("unverifiedLedgers", json.dumps(list(unverified or []))).load())


def read_ledgers_map(spark: SparkSession, paths: list[str]) -> DataFrame:
    return (spark.read.format("bkentrylog").option("paths", _paths_option(paths))
            .option("mode", "ledgersmap").load())


def read_journals(spark: SparkSession, paths: list[str], *, verify: bool = False,
                  problems_only: bool = False, unverified: list[int] | None = None,
                  tally: bool = False) -> DataFrame:
    return (spark.read.format("bkjournal").option("paths", _paths_option(paths))
            .option("verify", str(verify).lower())
            .option("problemsOnly", str(problems_only).lower())
            .option("tally", str(tally).lower())
            .option("unverifiedLedgers", json.dumps(list(unverified or []))).load())


def counted(frame: DataFrame, name: str, count) -> tuple[DataFrame, Observation]:
    """``frame`` observed: after the one action over a frame derived from it,
    ``observation.get[name]`` is ``count`` (an aggregate column) over its rows. Counting
    this way costs no second scan, where a ``count()`` would read the files again."""
    observation = Observation(name)
    return frame.observe(observation, F.coalesce(count, F.lit(0)).alias(name)), observation


def _rows(df: DataFrame) -> list[dict]:
    return [row.asDict(recursive=True) for row in df.collect()]


def _out(out: str | None, name: str) -> str | None:
    return None if out is None else posixpath.join(out.rstrip("/"), name)


# ----------------------------------------------------------------------- scrub

PROBLEM_COLUMNS = ("path", "logId", "offset", "ledgerId", "entryId", "size", "problem")


def scrub_problems(entries: DataFrame) -> DataFrame:
    """The rows of a verified entry (or journal) scan whose ``problem`` is set."""
    return entries.where(F.col("problem").isNotNull())


def run_scrub(spark: SparkSession, paths: list[str], out: str | None = None,
              journals: bool = False, unverified: list[int] | None = None) -> JobResult:
    """Scrub entry logs (and journals) in one scan that ships only problem rows (sources.py).

    ``unverified``: ledgers whose digests cannot be checked (MAC, DUMMY; see
    ``unverifiable_ledgers``), not reported as digest mismatches.
    """
    files = fs.list_files(paths, fs.LOG_KIND)
    # Each file's tally row carries its entry count past the problems-only filter.
    entries, entries_seen = counted(read_entries(
        spark, paths, verify=True, problems_only=True, unverified=unverified, tally=True),
        "entries", F.sum("entries"))
    problems = scrub_problems(entries).select(*PROBLEM_COLUMNS)
    if journals:
        records, records_seen = counted(read_journals(
            spark, paths, verify=True, problems_only=True, unverified=unverified,
            tally=True), "journalEntries", F.sum("entries"))
        problems = problems.unionByName(scrub_problems(records).select(
            "path", F.col("journalId").alias("logId"), "offset", "ledgerId", "entryId",
            "size", "problem"))
    rows, outputs = _report(problems, _out(out, "scrub"))
    rows.sort(key=lambda row: (row["path"], row["offset"]))
    summary = {"logs": len(files), "bytes": sum(ref.size for ref in files),
               "entries": entries_seen.get["entries"], "problems": len(rows)}
    if journals:
        summary["journalEntries"] = records_seen.get["journalEntries"]
    return JobResult("scrub", len(rows), summary, rows, outputs)


def _report(frame: DataFrame, target: str | None) -> tuple[list[dict], dict[str, str]]:
    """All rows of a (small) report, written first to ``target`` when given: one Spark
    action either way; the driver reads the written Parquet back and adds JSON lines."""
    if target is None:
        return _rows(frame), {}
    frame.write.mode("overwrite").parquet(target)
    rows = fs.read_parquet_rows(target)
    fs.write_json_lines(target + ".jsonl", rows)
    return rows, {"parquet": target, "json": target + ".jsonl"}


def unverifiable_ledgers(paths: list[str], index_dir: str | None = None) -> list[int]:
    """Ledgers whose digests the pipeline cannot check: MAC (keyed by the password) and
    DUMMY (no digest), from the ``ledgers`` RocksDB index (docs/formats.md §7.2): ``index_dir``,
    else that of every PATH that is a local data dir. Opened read-only, so a running bookie
    is fine. Empty when there is none: every digest is then checked as CRC32C or CRC32."""
    dirs = [index_dir] if index_dir else [
        posixpath.join(path, "ledgers", "current", "ledgers") for path in paths
        if not fs.is_uri(path)]
    found: set[int] = set()
    for directory in dirs:
        if not os.path.isdir(directory):
            continue
        index = LedgerMetadataIndex.open(directory, create=False, read_only=True)
        try:
            # Deleted ledgers too: their entries stay in the logs until GC removes them.
            found.update(ledger_id for ledger_id in index.ledger_ids() + index.deleted_ids()
                         if index.get(ledger_id).digest_type in _UNVERIFIABLE)
        finally:
            index.close()
    return sorted(found)


# ----------------------------------------------------------------------- usage

def usage_by_ledger(ledgers_map: DataFrame, live: DataFrame | None) -> DataFrame:
    """The ledgersmap rows with ``live`` (null when no live list was given, or for a log's
    row without ledgers)."""
    if live is None:
        return ledgers_map.withColumn("live", F.lit(None).cast("boolean"))
    marked = live.select("ledgerId").distinct().withColumn("isLive", F.lit(True))
    joined = ledgers_map.join(F.broadcast(marked), "ledgerId", "left")
    live_flag = F.when(F.col("ledgerId").isNotNull(), F.coalesce("isLive", F.lit(False)))
    return joined.withColumn("live", live_flag).drop("isLive")


def usage_by_log(by_ledger: DataFrame, has_live: bool, minor: float = MINOR_THRESHOLD,
                 major: float = MAJOR_THRESHOLD) -> DataFrame:
    """One row per log: total and live bytes, usage = live / total, garbage ratio, and the
    compaction that would rewrite it (BookKeeper's GarbageCollectorThread):
        delete  no live bytes left: GC removes the log without compacting it
        minor   usage < minor threshold (default 0.2)
        major   usage < major threshold (default 0.8)
    The newest log of a dir without a trailer may still be appended by a running bookie,
    so it is never a candidate (BookKeeper compacts only flushed logs)."""
    live_bytes = F.sum(F.when(F.col("live"), F.col("bytes")).otherwise(0))
    table = by_ledger.groupBy("path", "logId").agg(
        F.first("fileBytes").alias("fileBytes"), F.count("ledgerId").alias("ledgers"),
        F.sum("bytes").alias("totalBytes"),
        (live_bytes if has_live else F.lit(None).cast("long")).alias("liveBytes"),
        F.first("source").alias("source"), F.first("finalized").alias("finalized"),
        F.first("mapProblem").alias("mapProblem"))
    in_dir = Window.partitionBy(F.regexp_extract("path", r"^(.*)/[^/]*$", 1))
    may_be_active = ~F.col("finalized") & (F.col("logId") == F.max("logId").over(in_dir))
    usage = F.when(F.col("totalBytes") > 0, F.col("liveBytes") / F.col("totalBytes"))
    compaction = (F.when(F.col("mayBeActive") | F.col("usage").isNull(), F.lit(None))
                  .when(F.col("liveBytes") == 0, "delete")
                  .when(F.col("usage") < minor, "minor")
                  .when(F.col("usage") < major, "major"))
    return (table.withColumn("mayBeActive", may_be_active).withColumn("usage", usage)
            .withColumn("garbageBytes", F.col("totalBytes") - F.col("liveBytes"))
            .withColumn("garbageRatio", 1 - F.col("usage"))
            .withColumn("compaction", compaction))


def load_live_ledgers(source: str) -> list[int]:
    """Live ledger ids from a file (one id a line; blank lines and # comments skipped) or
    from a running bookie's ``GET /v1/ledgers`` (docs/http-api.md), followed page by page."""
    if source.startswith(("http://", "https://")):
        return fetch_live_ledgers(source)
    filesystem, path, _ = fs.split_uri(source)
    with filesystem.open_input_stream(path) as stream:
        text = stream.read().decode("utf-8")
    ids = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if line:
            try:
                ids.append(int(line))
            except ValueError:
                raise ValueError(f"{source}:{number}: {line!r} is not a ledger id") from None
    return ids


def fetch_live_ledgers(url: str, page_limit: int = LEDGERS_PAGE_LIMIT) -> list[int]:
    """Every id of ``GET /v1/ledgers?start=S&limit=L`` -> {"ledgers": [...], "next": S|null}.

    Written defensively: ``url`` may be the bookie's base URL or the endpoint itself; an
    item may be an id or an object with "ledgerId"; a missing ``next`` ends the listing; a
    ``next`` that does not advance is an error rather than an endless loop.
    """
    parts = urllib.parse.urlsplit(url)
    path = parts.path.rstrip("/")
    if not path.endswith("/v1/ledgers"):
        path += "/v1/ledgers"
    ids: list[int] = []
    start = None
    for _ in range(LEDGERS_PAGES_MAX):
        query = {"limit": page_limit} if start is None else {"start": start,
                                                               "limit": page_limit}
        page_url = urllib.parse.urlunsplit(
            (parts.scheme, parts.netloc, path, urllib.parse.urlencode(query), ""))
        with urllib.request.urlopen(page_url, timeout=HTTP_TIMEOUT_S) as reply:
            page = json.loads(reply.read())
        ids.extend(_ledger_ids_of_page(page, page_url))
        following = page.get("next")
        if following is None:
            return ids
        if start is not None and int(following) <= start:
            raise ValueError(f"{page_url}: next={following} does not advance past {start}")
        start = int(following)
    raise ValueError(f"{url}: more than {LEDGERS_PAGES_MAX} pages of ledgers")


def _ledger_ids_of_page(page, page_url: str) -> list[int]:
    if not isinstance(page, dict) or not isinstance(page.get("ledgers"), list):
        raise ValueError(f"{page_url}: expected {{\"ledgers\": [...], \"next\": ...}}")
    return [int(item["ledgerId"] if isinstance(item, dict) else item)
            for item in page["ledgers"]]


def run_usage(spark: SparkSession, paths: list[str], out: str | None = None,
              live_source: str | None = None, minor: float = MINOR_THRESHOLD,
              major: float = MAJOR_THRESHOLD) -> JobResult:
    """Usage per ledger per log and per log; problems = finalized logs whose trailer does
    not read back (they were scanned instead)."""
    live = None
    if live_source is not None:
        ids = load_live_ledgers(live_source)
        live = spark.createDataFrame([(i,) for i in ids], "ledgerId bigint")
    by_ledger = usage_by_ledger(read_ledgers_map(spark, paths), live)
    outputs = {}
    if out is not None:
        # Cached by the write, so the per-log table does not read the trailers again.
        by_ledger = by_ledger.cache()
        outputs = {"byLedger": _out(out, "usage-by-ledger"),
                   "byLog": _out(out, "usage-by-log.jsonl")}
        by_ledger.write.mode("overwrite").parquet(outputs["byLedger"])
    logs = sorted(_rows(usage_by_log(by_ledger, live is not None, minor, major)),
                  key=lambda row: row["path"])
    if out is not None:
        fs.write_json_lines(outputs["byLog"], logs)
        by_ledger.unpersist()
    problems = sum(1 for row in logs if row["finalized"] and row["mapProblem"] is not None)
    return JobResult("usage", problems, _usage_summary(logs, live is not None), logs, outputs)


def _usage_summary(logs: list[dict], has_live: bool) -> dict:
    total = sum(row["totalBytes"] for row in logs)
    summary = {"logs": len(logs), "totalBytes": total,
               "scanned": [row["path"] for row in logs if row["source"] == "scan"]}
    if has_live:
        live = sum(row["liveBytes"] for row in logs)
        summary.update(liveBytes=live, garbageRatio=(1 - live / total) if total else None)
        for kind in ("delete", "minor", "major"):
            summary[kind] = [row["path"] for row in logs if row["compaction"] == kind]
    return summary


# ----------------------------------------------------------------------- export

def export_frame(entries: DataFrame) -> DataFrame:
    """Entries in the export's columns (batches.export_schema): for Spark's own writers,
    e.g. another format or table; ``run_export`` writes Parquet without the JVM."""
    columns = ["entryId", "logId", (F.col("offset") + SIZE_FIELD_BYTES).alias("pos"),
               "size", "path"]
    if "entry" in entries.columns:
        columns.append("entry")
    return entries.select(*columns, "ledgerId")


def _export_log(target: str, payload: bool, ref: fs.FileRef) -> tuple[int, list[int]]:
    """One task: one log to Parquet under ``target``, by the executor's pyarrow."""
    disk, path = fs.disk_for(ref.uri)
    filesystem, base_dir, _ = fs.split_uri(target)
    with EntryLogReader(disk, path, log_id=ref.file_id) as reader:
        rows, ledgers = batches.write_export(
            batches.entry_batches(reader, ref.uri, payload=payload), payload, filesystem,
            base_dir, f"log-{ref.file_id:x}")
    return rows, sorted(ledgers)


def run_export(spark: SparkSession, paths: list[str], out: str, payload: bool = True,
               writer: str = "arrow") -> JobResult:
    """Entries to Parquet under ``out``/entries, one directory per ledger (ledgerId=N).

    writer "arrow" (default): one task per log reads it and writes its files with pyarrow,
    so the entries never cross into the JVM (Spark's Parquet writer measured ~150 MiB/s on
    1 KiB entries against ~400 MiB/s per core for pyarrow). writer "spark":
    ``export_frame`` through Spark's writer. Both give the same files' columns.
    """
    target = _out(out, "entries")
    files = fs.list_files(paths, fs.LOG_KIND)
    if writer == "spark":
        frame = export_frame(read_entries(spark, paths, payload=payload))
        frame.write.mode("overwrite").partitionBy("ledgerId").parquet(target)
        entries, ledgers = fs.parquet_counts(target, partition="ledgerId")
    else:
        fs.remove_dir(target)  # overwrite, as Spark's mode("overwrite")
        task = functools.partial(_export_log, target, payload)
        results = spark.sparkContext.parallelize(files, len(files)).map(task).collect()
        fs.mark_success(target)
        entries = sum(rows for rows, _ in results)
        ledgers = len({ledger for _, ids in results for ledger in ids})
    summary = {"logs": len(files), "bytes": sum(ref.size for ref in files),
               "entries": entries, "ledgers": ledgers, "writer": writer}
    return JobResult("export", 0, summary, [], {"parquet": target})
