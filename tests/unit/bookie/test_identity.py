"""Data-dir identity (bookie/identity.py): refusals name both values."""

from __future__ import annotations

import json
import os

import pytest

from bookie.disk import OsDisk
from bookie.identity import IDENTITY, IdentityMismatch, check_or_create


def _dirs(root):
    return os.path.join(root, "journal", "current"), os.path.join(root, "ledgers", "current")


def test_first_start_writes_identity_and_later_starts_accept_it(tmp_path):
    journal, ledgers = _dirs(str(tmp_path))
    first = check_or_create(OsDisk(), journal, ledgers)
    assert check_or_create(OsDisk(), journal, ledgers) == first
    with open(os.path.join(journal, IDENTITY)) as handle:
        assert json.load(handle)["instanceId"] == first["instanceId"]


def test_swapped_dirs_are_refused_naming_both_ids(tmp_path):
    a_journal, a_ledgers = _dirs(str(tmp_path / "a"))
    b_journal, b_ledgers = _dirs(str(tmp_path / "b"))
    a = check_or_create(OsDisk(), a_journal, a_ledgers)["instanceId"]
    b = check_or_create(OsDisk(), b_journal, b_ledgers)["instanceId"]
    with pytest.raises(IdentityMismatch) as refused:
        check_or_create(OsDisk(), a_journal, b_ledgers)
    assert a in refused.value.message and b in refused.value.message


def test_an_emptied_ledger_dir_is_refused(tmp_path):
    journal, ledgers = _dirs(str(tmp_path))
    ident = check_or_create(OsDisk(), journal, ledgers)["instanceId"]
    open(os.path.join(journal, "1.txn"), "wb").close()  # the bookie ran
    for name in os.listdir(ledgers):
        os.unlink(os.path.join(ledgers, name))
    with pytest.raises(IdentityMismatch, match=f"{ident}.*emptied"):
        check_or_create(OsDisk(), journal, ledgers)


def test_unknown_format_version_is_refused(tmp_path):
    journal, ledgers = _dirs(str(tmp_path))
    check_or_create(OsDisk(), journal, ledgers)
    path = os.path.join(ledgers, IDENTITY)
    with open(path) as handle:
        data = json.load(handle)
    data["format"] = 99
    with open(path, "w") as handle:
        json.dump(data, handle)
    with pytest.raises(IdentityMismatch, match="format version 99, this bookie knows 1"):
        check_or_create(OsDisk(), journal, ledgers)


def test_a_crash_between_the_two_identity_writes_is_finished_not_refused(tmp_path):
    journal, ledgers = _dirs(str(tmp_path))
    ident = check_or_create(OsDisk(), journal, ledgers)
    os.unlink(os.path.join(journal, IDENTITY))  # as if killed before the second write
    assert check_or_create(OsDisk(), journal, ledgers) == ident
    assert os.path.exists(os.path.join(journal, IDENTITY))


def test_a_data_dir_without_identity_is_adopted(tmp_path):
    journal, ledgers = _dirs(str(tmp_path))
    os.makedirs(journal)
    open(os.path.join(journal, "5.txn"), "wb").close()
    assert check_or_create(OsDisk(), journal, ledgers)["format"] == 1


def test_an_index_dir_apart_carries_the_identity_and_an_emptied_one_is_refused(tmp_path):
    journal, ledgers = _dirs(str(tmp_path))
    index = os.path.join(str(tmp_path), "nvme", "index", "current")
    ident = check_or_create(OsDisk(), journal, ledgers, [index])
    assert ident["indexDirs"] == [index]
    with open(os.path.join(index, IDENTITY)) as handle:
        copy = json.load(handle)
    assert (copy["instanceId"], copy["dirKind"], copy["dirIndex"]) == \
        (ident["instanceId"], "index", 0)
    assert check_or_create(OsDisk(), journal, ledgers, [index]) == ident
    open(os.path.join(ledgers, "0.log"), "wb").close()  # the bookie ran
    for name in os.listdir(index):  # the index volume replaced, the ledger dir kept
        os.unlink(os.path.join(index, name))
    with pytest.raises(IdentityMismatch,
                       match=f"index dir {index} has no identity \\(emptied\\)"):
        check_or_create(OsDisk(), journal, ledgers, [index])
    with pytest.raises(IdentityMismatch, match="created with 1 index dir\\(s\\) apart"):
        check_or_create(OsDisk(), journal, ledgers)  # index_dirs dropped
