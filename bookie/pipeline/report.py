"""The CLI's summary of a job: rates added to what the job counted, then text or JSON.

Rates keep three significant digits, so a small rate reads 0.0123, never 0; a large one is
a whole number. Imports no pyspark.
"""

from __future__ import annotations

import json
import math

MiB = 1 << 20
#: Report rows printed in text mode; --json and --out carry all of them.
PRINTED_ROWS_MAX = 20
SIGNIFICANT_DIGITS = 3
#: summary key counted -> the rate's key: the items per second of the whole run.
RATES = {"entries": "entriesPerSecond", "journalEntries": "journalEntriesPerSecond"}


def significant(value: float, digits: int = SIGNIFICANT_DIGITS) -> float | int:
    """``value`` to ``digits`` significant digits (whole numbers stay whole): 0.012345 ->
    0.0123, 12.345 -> 12.3, 1234.5 -> 1234 (an int)."""
    if value == 0 or not math.isfinite(value):
        return 0 if value == 0 else value
    decimals = digits - 1 - math.floor(math.log10(abs(value)))
    if decimals <= 0:
        return int(round(value))
    return round(value, decimals)


def with_rates(job: str, summary: dict, elapsed_s: float) -> dict:
    """``summary`` and its rates over ``elapsed_s``: entries/s for what was counted, MiB/s
    of the bytes read, and logs/s for usage, which reads trailers (it counts no entries)."""
    seconds = max(elapsed_s, 1e-9)
    rates = {rate: significant(summary[count] / seconds)
             for count, rate in RATES.items() if isinstance(summary.get(count), int)}
    if isinstance(summary.get("bytes"), int):
        rates["mibPerSecond"] = significant(summary["bytes"] / MiB / seconds)
    if job == "usage" and isinstance(summary.get("logs"), int):
        rates["logsPerSecond"] = significant(summary["logs"] / seconds)
    return {**summary, **rates}


def print_result(result, elapsed_s: float, as_json: bool) -> None:
    summary = with_rates(result.job, result.summary, elapsed_s)
    if as_json:
        print(json.dumps({"job": result.job, "problems": result.problems,
                          "elapsedSeconds": round(elapsed_s, 3), "summary": summary,
                          "rows": result.rows, "outputs": result.outputs},
                         default=str, sort_keys=True))
        return
    print(f"{result.job}: {result.problems} problem(s) in {elapsed_s:.1f} s")
    for key, value in summary.items():
        print(f"  {key}: {value}")
    for row in result.rows[:PRINTED_ROWS_MAX]:
        print("  " + json.dumps(row, default=str, sort_keys=True))
    if len(result.rows) > PRINTED_ROWS_MAX:
        print(f"  ... {len(result.rows) - PRINTED_ROWS_MAX} more rows (--json or --out)")
    for name, path in result.outputs.items():
        print(f"  {name} -> {path}")
