"""Issue 54: `bookie ledger` as a new user met it, against a real bookie on 127.0.0.1."""

from __future__ import annotations

import json
import os

from tests.integration.test_ledger_client_cli import ledger_cli


async def test_info_with_metadata_needs_no_bookie(server, tmp_path):
    metadata = os.path.join(str(tmp_path), "meta.json")
    code, out, err = await ledger_cli("write", "--url", server.url, "--metadata", metadata,
                                      stdin=b"a\nb\n")
    assert code == 0, err
    ledger = str(json.loads(out)["ledgerId"])
    for flag, value in (("--metadata", metadata), ("--metadata-service-uri", f"file://{metadata}")):
        code, out, err = await ledger_cli("info", flag, value, "--ledger", ledger)  # no --url
        assert code == 0, err
        assert json.loads(out)["metadata"]["state"] == "CLOSED"


async def test_tail_and_recover_refuse_an_unknown_ledger_and_create_none(server, client):
    code, out, err = await ledger_cli("tail", "--url", server.url, "--ledger", "999")
    assert (code, out) == (1, b"") and "ENOLEDGER" in err and "999" in err
    assert len(err.strip().splitlines()) == 1
    code, out, err = await ledger_cli("recover", "--url", server.url, "--ledger", "998")
    assert (code, out) == (1, b"") and "ENOLEDGER" in err and "998" in err
    code, _, err = await ledger_cli("info", "--url", server.url, "--ledger", "998")
    assert code == 1 and "ENOLEDGER" in err  # the fence did not create it


async def test_recover_refuses_a_ledger_missing_from_the_metadata(server, tmp_path):
    metadata = os.path.join(str(tmp_path), "meta.json")
    await ledger_cli("write", "--url", server.url, "--ledger", "5", stdin=b"x\n")
    code, _, err = await ledger_cli("recover", "--url", server.url, "--metadata", metadata,
                                    "--ledger", "5")
    assert code == 1 and "ENOLEDGER" in err
    code, out, _ = await ledger_cli("info", "--url", server.url, "--ledger", "5")
    assert json.loads(out)["fenced"] is False


async def test_a_wrong_digest_says_so_and_names_the_flag(server):
    await ledger_cli("write", "--url", server.url, "--ledger", "6", stdin=b"x\n")
    code, out, err = await ledger_cli("read", "--url", server.url, "--ledger", "6",
                                      "--digest", "crc32")
    assert (code, out) == (1, b"")
    assert "digest does not match" in err and "--digest crc32" in err and "shorter" not in err


async def test_reads_past_the_end_print_what_there_is_and_a_note(server):
    await ledger_cli("write", "--url", server.url, "--ledger", "7", stdin=b"a\nb\nc\nd\ne\n")
    code, out, err = await ledger_cli("read", "--url", server.url, "--ledger", "7",
                                      "--from", "3", "--to", "10")
    assert (code, out) == (0, b"d\ne\n") and "ledger 7 ends at entry 4; asked up to 10" in err
    code, out, err = await ledger_cli("read", "--url", server.url, "--ledger", "7",
                                      "--from", "10")
    assert (code, out) == (0, b"") and "ledger 7 ends at entry 4; asked from 10" in err
    code, out, err = await ledger_cli("read", "--url", server.url, "--ledger", "7")
    assert (code, out, err) == (0, b"a\nb\nc\nd\ne\n", "")


async def test_an_existing_ledger_points_at_append(server):
    await ledger_cli("write", "--url", server.url, "--ledger", "8", stdin=b"x\n")
    code, _, err = await ledger_cli("write", "--url", server.url, "--ledger", "8", stdin=b"y\n")
    assert code == 1 and "--append" in err
