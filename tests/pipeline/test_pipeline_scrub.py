"""Scrub finds exactly the entries damaged on purpose, at their exact file and offset."""

from __future__ import annotations

import json
import random
import struct

import pyarrow.parquet as pq

from bookie.pipeline import jobs
from bookie.pipeline.__main__ import main
from tests.pipeline.datagen import BOOKIE_DUMMY_LEDGER, BOOKIE_ENTRIES_PER_LEDGER
from tests.pipeline.datagen import flip_byte, generate, interleaved_records, payload_pool, \
    write_log


def _found(rows) -> set:
    return {(row["path"], row["offset"], row["ledgerId"], row["entryId"]) for row in rows}


def _plant_framing_damage(data) -> tuple[str, int]:
    """A finalized log whose third record's size field reads 5: corruption (E3), not a tail."""
    rng = random.Random(3)
    log = write_log(data.ledger_dir, 9, interleaved_records([6], 6, payload_pool(3), rng))
    offset = sorted(offset for offset, _ in log.entries.values())[2]
    with open(log.path, "r+b") as handle:
        handle.seek(offset)
        handle.write(struct.pack(">i", 5))
    return log.path, offset


def test_scrub_finds_exactly_the_corrupted_entries(spark, tmp_path):
    data = generate(str(tmp_path / "data"))
    framing = _plant_framing_damage(data)
    result = jobs.run_scrub(spark, [data.root])
    assert _found(result.rows) == set(data.damaged) | {(*framing, None, None)}
    by_offset = {(row["path"], row["offset"]): row["problem"] for row in result.rows}
    assert "entry size 5 < 16" in by_offset[framing]
    assert all("digest mismatch" in by_offset[(path, offset)]
               for path, offset, _, _ in data.damaged)
    assert result.problems == len(data.damaged) + 1
    assert result.summary["logs"] == len(data.logs) + 1
    # Every entry scanned is counted, the damaged ones too; the framing damage in the
    # planted log stops its scan after its first two entries.
    assert result.summary["entries"] == sum(len(log.entries) for log in data.logs) + 2


def test_scrub_of_journals_finds_the_damaged_add_record(spark, tmp_path):
    data = generate(str(tmp_path / "data"), damage=False)
    offset, entry = data.journal_adds[(2, 3)]
    flip_byte(data.journals[0], offset + 4 + len(entry) - 1)  # the payload's last byte
    result = jobs.run_scrub(spark, [data.root], journals=True)
    assert _found(result.rows) == {(data.journals[0], offset, 2, 3)}
    assert result.summary["journalEntries"] == len(data.journal_adds)
    assert result.summary["entries"] == sum(len(log.entries) for log in data.logs)


def test_scrub_report_over_file_uris_names_the_same_entries(spark, damaged_dir, tmp_path):
    # file:// goes through pyarrow.fs (fs.ArrowDisk), the path taken by hdfs:// and s3://.
    out = str(tmp_path / "out")
    result = jobs.run_scrub(spark, ["file://" + damaged_dir.root], out=out)
    expected = {("file://" + path, offset, ledger, entry)
                for path, offset, ledger, entry in damaged_dir.damaged}
    assert result.problems == len(expected)
    assert _found(pq.read_table(result.outputs["parquet"]).to_pylist()) == expected
    with open(result.outputs["json"]) as handle:
        assert _found(json.loads(line) for line in handle) == expected


def test_cli_exits_non_zero_exactly_when_scrub_finds_problems(spark, damaged_dir, tmp_path,
                                                              capsys):
    assert main(["scrub", damaged_dir.root, "--master", "local[2]", "--json"]) == 1
    printed = json.loads(capsys.readouterr().out)
    assert printed["problems"] == len(damaged_dir.damaged)
    clean = generate(str(tmp_path / "clean"), damage=False)
    assert main(["scrub", clean.root, "--master", "local[2]"]) == 0
    assert "scrub: 0 problem(s)" in capsys.readouterr().out


def test_scrub_skips_the_digests_the_ledgers_index_says_it_cannot_check(spark, bookie_dir,
                                                                        capsys):
    # DUMMY entries carry no digest; from the log alone they read as mismatches.
    assert jobs.unverifiable_ledgers([bookie_dir]) == [BOOKIE_DUMMY_LEDGER]
    blind = jobs.run_scrub(spark, [bookie_dir])
    assert {row["ledgerId"] for row in blind.rows} == {BOOKIE_DUMMY_LEDGER}
    assert len(blind.rows) == BOOKIE_ENTRIES_PER_LEDGER
    # The CLI reads the data dir's ledgers index itself (read-only) and finds nothing.
    assert main(["scrub", bookie_dir, "--master", "local[2]"]) == 0
    assert "scrub: 0 problem(s)" in capsys.readouterr().out


def test_a_bad_digest_before_framing_damage_in_the_same_log_is_still_reported(tmp_path):
    """A log's scan that ends at framing damage reports the digest problems found before
    it, then the damage (the scan ends and _log_problem names it; only a bad header raises
    CorruptRecord, before any entry), in both the problems-only and the full scan."""
    from bookie.disk import OsDisk  # noqa: PLC0415
    from bookie.pipeline.batches import entry_batches  # noqa: PLC0415
    from entrylog.reader import EntryLogReader  # noqa: PLC0415

    ledger_dir = tmp_path / "current"
    ledger_dir.mkdir()
    log = write_log(str(ledger_dir), 3, interleaved_records([6], 6, payload_pool(4),
                                                            random.Random(4)))
    first, _, third = sorted(offset for offset, _ in log.entries.values())[:3]
    flip_byte(log.path, first + 4 + 40)  # inside the first entry's header: CRC32C fails
    with open(log.path, "r+b") as handle:
        handle.seek(third)
        handle.write(struct.pack(">i", 5))
    for problems_only in (True, False):
        with EntryLogReader(OsDisk(), log.path, log_id=3) as reader:
            rows = [row for batch in entry_batches(reader, log.path, verify=True,
                                                   problems_only=problems_only)
                    for row in batch.to_pylist() if row["problem"]]
        assert [(row["offset"], "digest" in row["problem"]) for row in rows] == [
            (first, True), (third, False)], problems_only
