"""The shell on a bookie that keeps its indexes apart (index_dirs, BookKeeper's
indexDirectories): ``--index-dir`` names the index dir whose ``current/locations`` and
``current/ledgers`` go with the ledger dir's entry logs."""

from __future__ import annotations

import asyncio
import os

from tests.shell.shell_support import KEY, LEDGER_TYPES, entry, run, small_config


async def _write(config) -> None:
    from tests.support.servers import running_bookie

    async with running_bookie(config) as running:
        for ledger_id in (1, 2, 3):
            for entry_id in range(5):
                await running.bookie.add_entry(ledger_id, entry_id, entry(ledger_id, entry_id),
                                               KEY, LEDGER_TYPES[ledger_id])
        await running.bookie.checkpoint()


def test_check_index_and_listledgers_read_the_index_dir(capsys, tmp_path):
    data, index = str(tmp_path / "data"), str(tmp_path / "nvme" / "index")
    asyncio.run(_write(small_config(data).replace(index_dirs=index)))
    assert not os.path.exists(os.path.join(data, "ledgers", "current", "locations"))
    where = ("--data-dir", data, "--index-dir", index, "--json")
    checked = run(capsys, "check-index", *where)
    assert checked.code == 0, checked.out + checked.err
    [summary] = checked.of_type("summary")
    assert summary["indexEntries"] == 15 and summary["indexProblems"] == 0
    assert summary["indexed"] == 15 and summary["missingFromIndex"] == 0
    listed = run(capsys, "listledgers", *where, "--entries")
    assert listed.code == 0, listed.err
    ledgers = {r["ledgerId"]: r for r in listed.of_type("ledger")}
    assert set(ledgers) == {1, 2, 3} and ledgers[2]["lastEntryId"] == 4
    files = run(capsys, "listfiles", *where)
    assert {r["path"] for r in files.of_type("file") if r["kind"] == "index"} == {
        os.path.join(index, "current", "locations"), os.path.join(index, "current", "ledgers")}
    missing = run(capsys, "check-index", "--data-dir", data, "--json")  # the ledger dir alone
    assert missing.code == 2 and "no locations index at" in missing.err
