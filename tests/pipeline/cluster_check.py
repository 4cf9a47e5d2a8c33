"""Checks a job's ``--json`` result against datagen's truth.json: the same claims as the
pipeline tests, for runs outside pytest (scripts/demo/spark_cluster_demo.sh). Not a test module.

    python -m tests.pipeline.cluster_check JOB DIR RESULT.json

Prints ``ok JOB`` and exits 0, or names the first difference and exits 1.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys

import pyarrow.dataset as pads
import pyarrow.parquet as pq


def _check_scrub(truth: dict, result: dict) -> None:
    found = sorted([row["path"], row["offset"], row["ledgerId"], row["entryId"]]
                   for row in result["rows"])
    _same("scrub problems", found, sorted(truth["damaged"]))


def _check_usage(truth: dict, result: dict) -> None:
    rows = pq.read_table(result["outputs"]["byLedger"]).to_pylist()
    by_ledger = {}
    for row in rows:
        if row["ledgerId"] is not None:
            by_ledger.setdefault(row["path"], {})[str(row["ledgerId"])] = row["bytes"]
    _same("usage per ledger per log", by_ledger, truth["totals"])
    live = set(truth["live"])
    for row in result["rows"]:
        totals = truth["totals"][row["path"]]
        expected = sum(size for ledger, size in totals.items() if int(ledger) in live)
        _same(f"live bytes of {row['path']}", row["liveBytes"], expected)


def _check_export(truth: dict, result: dict) -> None:
    table = pads.dataset(result["outputs"]["parquet"], format="parquet",
                         partitioning="hive").to_table()
    damaged = {f"{ledger}/{entry}" for _, _, ledger, entry in truth["damaged"]}
    found = {}
    for row in table.to_pylist():
        key = f"{row['ledgerId']}/{row['entryId']}"
        digest = hashlib.sha256(row["entry"]).hexdigest()
        found[key] = [row["path"], row["pos"] - 4, None if key in damaged else digest]
    expected = {key: [path, offset, None if key in damaged else digest]
                for key, (path, offset, digest) in truth["entries"].items()}
    _same("exported entries", found, expected)


def _check_index(truth: dict, result: dict) -> None:
    found = sorted([row["kind"], row["ledgerId"], row["entryId"]]
                   for row in result["rows"])
    _same("index mismatches", found, sorted(truth["index"]))


def _same(what: str, found, expected) -> None:
    if found != expected:
        raise SystemExit(f"FAILED {what}:\n  found    {found}\n  expected {expected}")


CHECKS = {"scrub": _check_scrub, "usage": _check_usage, "export": _check_export,
          "index-check": _check_index}


def main(argv: list[str]) -> int:
    job, directory, result_path = argv
    with open(os.path.join(directory, "truth.json")) as handle:
        truth = json.load(handle)
    with open(result_path) as handle:
        lines = [line for line in handle if line.startswith("{")]
    CHECKS[job](truth, json.loads(lines[-1]))
    print(f"ok {job}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
