"""``bookie ledger`` as a person uses it: subprocesses against a real bookie on 127.0.0.1,
payloads through stdin and stdout."""

from __future__ import annotations

import asyncio
import json
import os
import sys

from tests.support.servers import ROOT

WAIT_S = 60


async def ledger_cli(*args: str, stdin: bytes = b"") -> tuple[int, bytes, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bookie", "ledger", *args, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env=dict(os.environ, PYTHONPATH=ROOT), cwd=ROOT)
    out, err = await asyncio.wait_for(proc.communicate(stdin), WAIT_S)
    return proc.returncode, out, err.decode()


async def test_write_then_read_reproduces_stdin_line_by_line(server):
    lines = b"".join(b"line %d\n" % i for i in range(50))
    code, out, err = await ledger_cli("write", "--url", server.url, "--ledger", "1",
                                      "--password", "pw", stdin=lines)
    assert code == 0, err
    assert json.loads(out) == {"ledgerId": 1, "lastEntryId": 49, "length": len(lines) - 50}
    code, out, err = await ledger_cli("read", "--url", server.url, "--ledger", "1",
                                      "--password", "pw")
    assert (code, out) == (0, lines), err
    code, out, _ = await ledger_cli("read", "--url", server.url, "--ledger", "1", "--last")
    assert out == b"line 49\n"


async def test_raw_chunks_round_trip_with_a_mac_digest(server):
    data = os.urandom(100_000)
    code, out, err = await ledger_cli("write", "--url", server.url, "--ledger", "2", "--raw",
                                      "4096", "--digest", "mac", "--password", "s", stdin=data)
    assert code == 0, err
    assert json.loads(out)["lastEntryId"] == 24  # 24 whole chunks and a short one
    code, out, _ = await ledger_cli("read", "--url", server.url, "--ledger", "2", "--raw",
                                    "--digest", "mac", "--password", "s")
    assert (code, out) == (0, data)
    code, out, err = await ledger_cli("read", "--url", server.url, "--ledger", "2", "--raw",
                                      "--digest", "mac", "--password", "wrong")
    assert code == 1 and "digest does not match" in err


async def test_tail_recover_and_info(server, tmp_path):
    metadata = os.path.join(str(tmp_path), "meta.json")
    code, out, err = await ledger_cli("write", "--url", server.url, "--metadata", metadata,
                                      stdin=b"a\nb\nc\n")
    assert code == 0, err
    ledger = str(json.loads(out)["ledgerId"])
    code, out, _ = await ledger_cli("tail", "--url", server.url, "--metadata", metadata,
                                    "--ledger", ledger)  # ends: the ledger is closed
    assert (code, out) == (0, b"a\nb\nc\n")
    code, out, _ = await ledger_cli("tail", "--url", server.url, "--ledger", ledger,
                                    "--from", "1", "--until", "1")
    assert (code, out) == (0, b"b\n")
    code, out, _ = await ledger_cli("recover", "--url", server.url, "--metadata", metadata,
                                    "--ledger", ledger)
    assert code == 0 and json.loads(out)["alreadyClosed"] is True
    code, out, _ = await ledger_cli("recover", "--url", server.url, "--ledger", ledger)
    assert code == 0 and json.loads(out)["lastEntryId"] == 2
    code, out, _ = await ledger_cli("info", "--url", server.url, "--metadata", metadata,
                                    "--ledger", ledger)
    info = json.loads(out)
    assert (info["fenced"], info["lac"], info["metadata"]["state"]) == (True, 2, "CLOSED")


async def test_errors_exit_1_with_the_code_and_help_explains(server):
    code, _, err = await ledger_cli("read", "--url", server.url, "--ledger", "404")
    assert code == 1 and "ENOLEDGER" in err
    code, _, _ = await ledger_cli("write", "--url", server.url, "--ledger", "3", stdin=b"x\n")
    code, _, err = await ledger_cli("write", "--url", server.url, "--ledger", "3", stdin=b"y\n")
    assert code == 1 and "already exists" in err
    code, out, _ = await ledger_cli("--help")
    assert code == 0 and b"write" in out and b"tail" in out and b"LAC" in out
    code, _, err = await ledger_cli("frobnicate")
    assert code == 2
