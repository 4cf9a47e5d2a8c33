"""``rebuild-index``: indexes rebuilt from the entry logs and journals of a real bookie equal
the ones it kept (by location, or by the bytes read back where an entry is stored twice)."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys

from bookie.disk import OsDisk
from bookie.entry import DigestType
from entrylog.reader import EntryLogReader
from ledgerindex.ledgers import LedgerMetadataIndex
from ledgerindex.locations import EntryLocationIndex
from tests.shell.shell_support import KEY, LEDGER_TYPES, entry, run, small_config
from tests.support.servers import ROOT, running_bookie


def _ledger_dir(data_dir: str) -> str:
    return os.path.join(data_dir, "ledgers", "current")


def _locations(data_dir: str) -> dict[tuple[int, int], int]:
    index = EntryLocationIndex.open(os.path.join(_ledger_dir(data_dir), "locations"),
                                    read_only=True)
    try:
        return {(lid, eid): loc for lid in range(10) for eid, loc in index.entries(lid)}
    finally:
        index.close()


def _states(data_dir: str) -> dict:
    index = LedgerMetadataIndex.open(os.path.join(_ledger_dir(data_dir), "ledgers"),
                                     read_only=True)
    try:
        return {i: index.get(i) for i in index.ledger_ids() + index.deleted_ids()}
    finally:
        index.close()


def _read(data_dir: str, key: tuple[int, int], location: int) -> bytes:
    path = os.path.join(_ledger_dir(data_dir), f"{location >> 32:x}.log")
    with EntryLogReader(OsDisk(), path) as reader:
        return reader.read_entry(location & 0xFFFFFFFF, *key)


def _drop_indexes(data_dir: str) -> None:
    for name in ("locations", "ledgers"):
        shutil.rmtree(os.path.join(_ledger_dir(data_dir), name))


def test_rebuilt_indexes_equal_the_originals(capsys, bookie_data_dir_master, bookie_data_dir):
    original, copy = bookie_data_dir_master, bookie_data_dir
    _drop_indexes(copy)
    result = run(capsys, "rebuild-index", "--data-dir", copy, "--json")
    assert result.code == 0, result.out
    [summary] = result.of_type("summary")
    assert summary["entries"] == 91 + 15 and summary["supersededCopies"] == 15
    assert summary["keysFromJournal"] == 6 and summary["keysUnknown"] == 0
    before, after = _locations(original), _locations(copy)
    assert set(after) == set(before) and len(after) == 91
    for key, location in after.items():
        # A copy stored twice may be indexed at either; the bytes must be the same.
        assert location == before[key] or _read(copy, key, location) == \
            _read(original, key, before[key])
        assert _read(copy, key, location) == entry(*key)
    states, old = _states(copy), _states(original)
    assert set(states) == set(old)
    for ledger_id, state in states.items():
        assert state.fenced and state.exists and state.master_key == KEY
        assert state.explicit_lac == old[ledger_id].explicit_lac
        # The journals' master-key records name every type, MAC and DUMMY too (formats.md
        # §3.4); from the entries alone only the CRC types could be learned.
        assert state.digest_type == int(LEDGER_TYPES[ledger_id])
    assert run(capsys, "scrub", "--data-dir", copy).code == 0
    assert run(capsys, "check-index", "--data-dir", copy).code == 0


def test_a_bookie_starts_on_rebuilt_indexes_and_reads_every_entry(capsys, bookie_data_dir):
    _drop_indexes(bookie_data_dir)
    assert run(capsys, "rebuild-index", "--data-dir", bookie_data_dir).code == 0
    stored = sorted(_locations(bookie_data_dir))

    async def read_all() -> None:
        async with running_bookie(small_config(bookie_data_dir)) as running:
            for ledger_id, entry_id in stored:
                data = await running.bookie.read_entry(ledger_id, entry_id)
                assert data == entry(ledger_id, entry_id)
            assert running.bookie.ledger_state(1).fenced

    asyncio.run(read_all())


def test_a_readable_old_index_gives_keys_types_and_deletions(capsys, bookie_data_dir):
    index = LedgerMetadataIndex.open(os.path.join(_ledger_dir(bookie_data_dir), "ledgers"))
    index.mark_deleted(3)
    index.close()
    before = _states(bookie_data_dir)
    result = run(capsys, "rebuild-index", "--data-dir", bookie_data_dir, "--json")
    assert result.code == 0, result.out
    [summary] = result.of_type("summary")
    assert summary["oldIndexReadable"] and summary["deleted"] == 1
    assert sorted(os.path.basename(p).split(".")[0] for p in summary["oldIndexesMovedTo"]) == \
        ["ledgers", "locations"]
    assert all(os.path.isdir(p) for p in summary["oldIndexesMovedTo"])
    states = _states(bookie_data_dir)
    assert not states[3].exists
    assert states[4].digest_type == int(DigestType.DUMMY) == before[4].digest_type
    assert all(s.fenced for i, s in states.items() if i != 3)
    assert not any(lid == 3 for lid, _ in _locations(bookie_data_dir))
    assert not [n for n in os.listdir(_ledger_dir(bookie_data_dir)) if n.endswith(".tmp")]


def test_out_builds_elsewhere_and_leaves_the_live_indexes(capsys, bookie_data_dir, tmp_path):
    before = _locations(bookie_data_dir)
    target = tmp_path / "rebuilt"
    result = run(capsys, "rebuild-index", "--data-dir", bookie_data_dir, "--out", target)
    assert result.code == 0
    assert sorted(os.listdir(target)) == ["ledgers", "locations"]
    assert _locations(bookie_data_dir) == before
    assert run(capsys, "rebuild-index", "--data-dir", bookie_data_dir, "--out",
               target).code == 2


def test_rebuild_refuses_while_a_bookie_holds_the_index(capsys, bookie_data_dir):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from ledgerindex.locations import "
         "EntryLocationIndex as I; i = I.open(sys.argv[1]); print('ready', flush=True); "
         "sys.stdin.read()", os.path.join(_ledger_dir(bookie_data_dir), "locations")],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline().strip() == b"ready"
        result = run(capsys, "rebuild-index", "--data-dir", bookie_data_dir)
        assert result.code == 2 and "a bookie is running" in result.err
    finally:
        holder.communicate(b"", timeout=60)
    assert run(capsys, "rebuild-index", "--data-dir", bookie_data_dir).code == 0


def test_damage_found_while_rebuilding_gives_exit_1(capsys, bookie_data_dir):
    folder = _ledger_dir(bookie_data_dir)
    second = 1024 + 4 + 336  # log 0 starts with ledger 1's 336-byte entries
    with open(os.path.join(folder, "0.log"), "r+b") as handle:
        handle.seek(second)
        handle.write(b"\x00\x00\x00\x05")
    result = run(capsys, "rebuild-index", "--data-dir", bookie_data_dir, "--json")
    assert result.code == 1
    [problem] = result.of_type("problem")
    assert problem["offset"] == second and "entry size 5 < 16" in problem["reason"]
