"""``bookie shell bk-ready``: before BookKeeper's DbLedgerStorage starts on our ledger dirs,
every ledger must sit in dir ``L mod n`` (BR1) and every index be in LedgerData form (BR2)."""

from __future__ import annotations

import os

from bookie.entry import master_key
from ledgerindex import keys
from ledgerindex.keys import LedgerState
from ledgerindex.kv import KeyValueStore
from ledgerindex.ledgers import LedgerMetadataIndex
from tests.shell.shell_support import run
from tests.support.legacy_ledger_state import encode_bkld

KEY = master_key(b"secret")


def ledger_dir(tmp_path, name: str, live=(), deleted=()) -> str:
    path = str(tmp_path / name)
    os.makedirs(os.path.join(path, "current"))
    index = LedgerMetadataIndex.open(os.path.join(path, "current", "ledgers"))
    try:
        for ledger_id in live:
            index.set_master_key(ledger_id, KEY)
        index.flush()
        for ledger_id in deleted:
            index.mark_deleted(ledger_id)
    finally:
        index.close()
    return path


def test_ledgers_in_their_bookkeeper_dirs_are_ready(capsys, tmp_path):
    dirs = [ledger_dir(tmp_path, "d0", live=[0, 2], deleted=[4]),
            ledger_dir(tmp_path, "d1", live=[1, 3])]
    result = run(capsys, "bk-ready", "--ledger-dirs", ",".join(dirs), "--json")
    assert result.code == 0, result.out + result.err
    [summary] = result.of_type("summary")
    assert summary == {"type": "summary", "ledgerDirs": 2, "ledgers": 4, "problems": 0}


def test_a_ledger_moved_off_its_dir_and_an_older_index_are_named(capsys, tmp_path):
    dirs = [ledger_dir(tmp_path, "d0", live=[0, 3], deleted=[5]),  # 3 and 5 belong in d1
            ledger_dir(tmp_path, "d1", live=[1])]
    older = str(tmp_path / "d2")
    with KeyValueStore.open(os.path.join(older, "current", "ledgers")) as kv:
        kv.put(keys.encode_ledger_key(2), encode_bkld(LedgerState(master_key=KEY)), sync=True)
    result = run(capsys, "bk-ready", "--ledger-dirs", ",".join(dirs + [older]))
    assert result.code == 1
    assert "ledger 3 is in" not in result.out  # three dirs now: 3 mod 3 = 0 is its home
    assert "tombstone of ledger 5 is in ledger dir 0" in result.out and "(5 mod 3)" in result.out
    assert "ledger 1 is in ledger dir 1" not in result.out
    assert f"{older}: the ledgers index is still of the older BKLD form" in result.out
    two = run(capsys, "bk-ready", "--ledger-dirs", ",".join(dirs))
    assert two.code == 1 and "ledger 3 is in ledger dir 0" in two.out and "(3 mod 2)" in two.out


def test_index_dirs_must_pair_with_ledger_dirs(capsys, tmp_path):
    result = run(capsys, "bk-ready", "--ledger-dirs", "a,b", "--index-dirs", "x")
    assert result.code == 2 and "1 index dirs for 2 ledger dirs" in result.err
