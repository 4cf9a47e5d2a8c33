"""Fuzzed bad input: no 5xx, no crash, nothing stored from a rejected request.

schemathesis drives every operation of /openapi.json with generated requests; hypothesis
drives ids, headers and batch framing at the add path and checks that a refused request
leaves the ledger exactly as it was.
"""

from __future__ import annotations

import os
import pathlib
import struct
import subprocess
import sys

import pytest
import requests
from hypothesis import HealthCheck, given, settings, strategies as st

from bookie.config import BookieConfig
from bookie.entry import frame_entry, master_key
from tests.support.servers import BackgroundBookie

KEY = master_key(b"fuzz")
REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    data_dir = str(tmp_path_factory.mktemp("fuzz") / "data")
    config = BookieConfig(data_dir=data_dir, port=0, checkpoint_interval_ms=3_600_000,
                          journal_prealloc_bytes=1 << 20)
    with BackgroundBookie(config) as running:
        yield running


def _schemathesis(url: str, workdir, *options: str) -> None:
    """The schemathesis CLI with every check against a live bookie, its hooks loaded
    (tests/support/schemathesis_hooks.py); fails with its report unless it finds nothing."""
    cli = os.path.join(os.path.dirname(sys.executable), "schemathesis")
    env = dict(os.environ, SCHEMATHESIS_HOOKS="tests.support.schemathesis_hooks",
               PYTHONPATH=str(REPO_ROOT), NO_COLOR="1")
    done = subprocess.run([cli, "run", url + "/openapi.json", "--checks", "all",
                           "--max-examples", "25", "--generation-database", "none", *options],
                          cwd=workdir, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-12000:] + done.stderr[-4000:]
    assert "No issues found" in done.stdout or " passed" in done.stdout, done.stdout[-3000:]


def test_the_description_is_exact_on_loopback_without_a_token(tmp_path):
    """Every check of schemathesis over every operation: statuses, bodies, schema-valid
    requests accepted and schema-invalid ones refused, auth as described. Setting the
    operator's read-only flag runs alone, last: it turns every later add into a 503."""
    config = BookieConfig(data_dir=str(tmp_path / "data"), port=0,
                          checkpoint_interval_ms=3_600_000, journal_prealloc_bytes=1 << 20)
    with BackgroundBookie(config) as running:
        _schemathesis(running.url, tmp_path, "--exclude-name", "PUT /v1/bookie/readonly")
        _schemathesis(running.url, tmp_path, "--include-name", "PUT /v1/bookie/readonly")


def test_the_description_is_exact_with_an_admin_token(tmp_path):
    """With admin_token set, admin operations require the bearer token (a security
    requirement in the description): schemathesis, holding none, must be refused."""
    config = BookieConfig(data_dir=str(tmp_path / "data"), port=0, admin_token="s3cret",
                          checkpoint_interval_ms=3_600_000, journal_prealloc_bytes=1 << 20)
    with BackgroundBookie(config) as running:
        _schemathesis(running.url, tmp_path)


# Printable ASCII without the space: HTTP clients refuse header values with leading spaces.
_HEADER_CHARS = st.characters(min_codepoint=33, max_codepoint=126)


def _ledger_snapshot(url: str, ledger_id: int):
    reply = requests.get(f"{url}/v1/ledgers/{ledger_id}", timeout=30)
    return reply.status_code, reply.json()


@given(ledger=st.one_of(st.integers(-2**64, 2**64), st.text(max_size=25)),
       entry=st.one_of(st.integers(-2**64, 2**64), st.text(max_size=25)),
       key=st.one_of(st.none(), st.text(_HEADER_CHARS, max_size=50),
                     st.binary(max_size=30).map(bytes.hex)),
       digest=st.one_of(st.none(), st.sampled_from(["crc32c", "crc32", "bogus", ""])),
       flags=st.one_of(st.none(), st.sampled_from(["deferred-sync", "x", "", "a,b"])),
       body=st.binary(max_size=300))
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
def test_random_adds_never_500_and_refused_ones_store_nothing(live, ledger, entry, key, digest,
                                                              flags, body):
    headers = {name: value for name, value in (("X-Master-Key", key), ("X-Digest-Type", digest),
                                               ("X-Write-Flags", flags)) if value is not None}
    watched = ledger if isinstance(ledger, int) and 0 <= ledger < 2**63 else 1
    before = _ledger_snapshot(live.url, watched)
    reply = requests.put(f"{live.url}/v1/ledgers/{ledger}/entries/{entry}", data=body,
                         headers=headers, timeout=30)
    assert reply.status_code < 500, reply.text
    if reply.status_code != 200:
        assert _ledger_snapshot(live.url, watched) == before


@given(frames=st.lists(st.one_of(
    st.binary(max_size=64).map(lambda b: struct.pack(">i", len(b)) + b),
    st.binary(max_size=12),
    st.integers(-2**31, 2**31 - 1).map(lambda n: struct.pack(">i", n))), max_size=6))
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
def test_random_batch_framing_never_500_and_refused_batches_store_nothing(live, frames):
    ledger_id = 77
    requests.put(f"{live.url}/v1/ledgers/{ledger_id}/entries/0",
                 data=frame_entry(ledger_id, 0, -1, 0, b"seed"),
                 headers={"X-Master-Key": KEY.hex()}, timeout=30)
    before = _ledger_snapshot(live.url, ledger_id)
    reply = requests.post(f"{live.url}/v1/ledgers/{ledger_id}/entries", data=b"".join(frames),
                          headers={"X-Master-Key": KEY.hex()}, timeout=30)
    assert reply.status_code < 500, reply.text
    if reply.status_code != 200:
        assert _ledger_snapshot(live.url, ledger_id) == before
