"""Usage equals every log's ledgersMap and the plain reader's totals; the live list and the
compaction thresholds decide the candidates."""

from __future__ import annotations

import http.server
import json
import threading
import urllib.parse

import pyarrow.parquet as pq
import pytest

from bookie.disk import OsDisk
from bookie.pipeline import jobs
from entrylog.reader import EntryLogReader
from tests.pipeline.datagen import generate

LIVE = {1, 2, 4, 5}  # ledger 3 was deleted: its bytes are garbage


def _plain_totals(log) -> tuple[dict[int, int], str]:
    with EntryLogReader(OsDisk(), log.path) as reader:
        return reader.ledger_totals()


def test_usage_equals_every_ledgers_map_and_the_plain_readers_totals(spark, tmp_path):
    data = generate(str(tmp_path / "data"), damage=False)
    live_file = tmp_path / "live.txt"
    live_file.write_text("# live ledgers\n" + "\n".join(map(str, sorted(LIVE))) + "\n\n")
    result = jobs.run_usage(spark, [data.root], out=str(tmp_path / "out"),
                            live_source=str(live_file), minor=0.2, major=0.8)
    by_ledger = pq.read_table(result.outputs["byLedger"]).to_pylist()
    per_log: dict[str, dict[int, int]] = {}
    for row in by_ledger:
        per_log.setdefault(row["path"], {})[row["ledgerId"]] = row["bytes"]
        assert row["live"] == (row["ledgerId"] in LIVE)
    for log in data.logs:
        totals, source = _plain_totals(log)
        assert source == ("ledgersMap" if log.finalized else "scan")
        assert per_log[log.path] == totals == log.totals
    rows = {row["path"]: row for row in result.rows}
    for log in data.logs:
        row = rows[log.path]
        live = sum(size for ledger, size in log.totals.items() if ledger in LIVE)
        assert (row["totalBytes"], row["liveBytes"]) == (sum(log.totals.values()), live)
        assert row["usage"] == pytest.approx(live / sum(log.totals.values()))
        assert row["source"] == ("ledgersMap" if log.finalized else "scan")
    assert result.problems == 0


def _expected_compaction(log, minor: float, major: float) -> str | None:
    if not log.finalized:
        return None  # the newest log without a trailer may still be written
    live = sum(size for ledger, size in log.totals.items() if ledger in LIVE)
    usage = live / sum(log.totals.values())
    if live == 0:
        return "delete"
    return "minor" if usage < minor else "major" if usage < major else None


def test_compaction_candidates_follow_the_thresholds(spark, damaged_dir):
    # The DataFrame functions directly, over one cached read of the trailers.
    live = spark.createDataFrame([(i,) for i in sorted(LIVE)], "ledgerId bigint")
    by_ledger = jobs.usage_by_ledger(jobs.read_ledgers_map(spark, [damaged_dir.root]),
                                     live).cache()
    try:
        seen = set()
        for minor, major in ((0.2, 0.8), (0.5, 0.6)):
            rows = by_ledger.transform(lambda frame: jobs.usage_by_log(
                frame, True, minor, major)).collect()
            found = {row["path"]: row["compaction"] for row in rows}
            assert found == {log.path: _expected_compaction(log, minor, major)
                             for log in damaged_dir.logs}
            seen |= set(found.values())
        assert {"minor", "major"} <= seen
    finally:
        by_ledger.unpersist()


def test_a_trailer_that_does_not_read_back_is_scanned_and_reported(spark, tmp_path):
    data = generate(str(tmp_path / "data"), damage=False)
    log = data.logs[1]
    with open(log.path, "r+b") as handle:  # the header's ledger count, one too many
        handle.seek(16)
        handle.write((len(log.totals) + 1).to_bytes(4, "big"))
    result = jobs.run_usage(spark, [data.root])
    row = next(row for row in result.rows if row["path"] == log.path)
    assert (row["source"], row["totalBytes"]) == ("scan", sum(log.totals.values()))
    assert "ledgersMap holds" in row["mapProblem"]
    assert result.problems == 1
    assert row["compaction"] is None and row["liveBytes"] is None  # no live list given


class _LedgersHandler(http.server.BaseHTTPRequestHandler):
    """``GET /v1/ledgers?start&limit`` as docs/http-api.md describes it, over a fixed id list."""

    ids = list(range(0, 50, 3))

    def do_GET(self):  # noqa: N802 (http.server's name)
        parts = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(parts.query)
        start, limit = int(query.get("start", ["0"])[0]), int(query["limit"][0])
        page = [i for i in self.ids if i >= start][:limit]
        rest = [i for i in self.ids if i > (page[-1] if page else start)]
        body = json.dumps({"ledgers": page, "next": rest[0] if rest else None}).encode()
        self.send_response(200 if parts.path == "/v1/ledgers" else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_live_ledgers_are_fetched_page_by_page_from_a_bookie_url():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _LedgersHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        assert jobs.fetch_live_ledgers(base, page_limit=4) == _LedgersHandler.ids
        assert jobs.load_live_ledgers(base + "/v1/ledgers") == _LedgersHandler.ids
    finally:
        server.shutdown()
        thread.join()
        server.server_close()
