"""bookie/conf_from_env.py (CE1-CE5): BookKeeper keys from the environment, as Pulsar's
image applies them, on real files: Pulsar's shipped bookkeeper.conf with the helm chart's
configmap, then read back by the real parsers."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys

import pytest

from bookie import conf_from_env
from bookie.properties import parse_properties
from tests.support.pulsar_chart import PULSAR_CONF, chart_environment

ROOT = PULSAR_CONF.parents[2]


def _applied(tmp_path, environ, text=None):
    path = tmp_path / "bookkeeper.conf"
    if text is None:
        shutil.copy(PULSAR_CONF, path)
    else:
        path.write_text(text)
    said: list[str] = []
    conf_from_env.apply_file(str(path), environ, say=said.append)
    return path, path.read_text(encoding="latin-1"), said


def test_the_charts_configmap_lands_in_pulsars_file_as_bookkeeper_reads_it(tmp_path):
    env = chart_environment("127.0.0.1:2181", root="/pulsar/data/bookkeeper")
    _, text, said = _applied(tmp_path, env)
    props = parse_properties(text, "bookkeeper.conf")
    value = {key: prop.value for key, prop in props.items()}
    # CE2: plain names replace the file's lines ...
    assert value["metadataServiceUri"] == "zk+hierarchical://127.0.0.1:2181/pulsar/ledgers"
    assert value["zkServers"] == "" and value["useHostNameAsBookieID"] == "true"
    assert value["journalMaxBackups"] == "0" and value["gcWaitTime"] == "300000"
    # CE1: ... a commented key is uncommented in place (its last line, the example's not)
    assert value["journalDirectories"] == "/pulsar/data/bookkeeper/journal"
    assert "#   journalDirectories=/tmp/bk-journal1,/tmp/bk-journal2\n" in text
    assert value["isForceGCAllowWhenNoSpace"] == "true"
    lines = text.splitlines()
    assert lines.index("journalDirectories=/pulsar/data/bookkeeper/journal") < \
        lines.index("journalDirectory=data/bookkeeper/journal")
    # CE2: a prefixed key the file lacks is added at the end
    assert value["dbStorage_rocksDB_format_version"] == "5"
    assert lines[-1] == "ledgerMetadataRocksdbConf=conf/non_existing_ledger_metadata_rocksdb.conf"
    # a variable that names no key of the file changes nothing (PULSAR_MEM is bkenv.sh's)
    assert "PULSAR_MEM" not in value
    assert "[" + str(tmp_path / "bookkeeper.conf") + \
        "] Applying config useHostNameAsBookieID = true" in said
    assert any(line.endswith("Adding config dbStorage_rocksDB_format_version = 5")
               for line in said)


def test_a_prefixed_variable_wins_over_the_plain_one_and_values_are_stripped(tmp_path):
    _, text, said = _applied(tmp_path, {"zkTimeout": " 20000 ",
                                        "PULSAR_PREFIX_zkTimeout": " 40000\n"},
                             "zkTimeout=30000\nother=1\n")
    assert text == "zkTimeout=40000\nother=1\n\n"
    assert said[0].endswith("Applying config zkTimeout = 20000")
    assert said[1].endswith("Updating config zkTimeout = 40000")


def test_a_password_is_never_printed(tmp_path):
    _, text, said = _applied(tmp_path, {"PULSAR_PREFIX_tlsKeyStorePassword": "s3cret",
                                        "tokenSecretKey": "data:abc"},
                             "tokenSecretKey=\n")
    assert "tlsKeyStorePassword=s3cret\n" in text and "tokenSecretKey=data:abc\n" in text
    assert not any("s3cret" in line or "data:abc" in line for line in said), said
    assert all(line.endswith("= ********") for line in said)


def test_a_file_without_a_last_newline_keeps_its_last_line(tmp_path):
    _, text, _ = _applied(tmp_path, {"PULSAR_PREFIX_b": "2"}, "a=1")
    assert text == "a=1\n\nb=2\n"


def test_the_file_is_replaced_whole_with_its_mode(tmp_path):
    """CE4: a new inode renamed over the old (a reader holding the old file sees it whole),
    the mode kept, no temporary file left."""
    path = tmp_path / "bookkeeper.conf"
    path.write_text("a=1\n")
    os.chmod(path, 0o640)
    before = os.stat(path).st_ino
    with open(path) as held:
        conf_from_env.apply_file(str(path), {"a": "2"}, say=lambda _: None)
        assert held.read() == "a=1\n"
    assert path.read_text() == "a=2\n\n"
    assert os.stat(path).st_ino != before
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bookkeeper.conf"]


def test_the_command_line_says_one_line_for_a_missing_file_and_leaves_the_rest(tmp_path):
    """CE5, through the command the image runs."""
    later = tmp_path / "later.conf"
    later.write_text("a=1\n")
    run = subprocess.run([sys.executable, "-m", "bookie.conf_from_env",
                          str(tmp_path / "missing.conf"), str(later)],
                         cwd=ROOT, capture_output=True, text=True, timeout=60,
                         env={**os.environ, "a": "2"})
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [
        f"apply-config-from-env: {tmp_path / 'missing.conf'}: No such file or directory"]
    assert later.read_text() == "a=1\n"
    help_ = subprocess.run([sys.executable, "-m", "bookie.conf_from_env", "--help"],
                           cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert help_.returncode == 0 and "PULSAR_PREFIX_" in help_.stdout


@pytest.mark.parametrize("prefix", ["MY_"])
def test_another_prefix(tmp_path, prefix):
    path = tmp_path / "c.conf"
    path.write_text("a=1\n")
    run = subprocess.run([sys.executable, "-m", "bookie.conf_from_env", "--prefix", prefix,
                          str(path)], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         env={**os.environ, "MY_b": "3", "PULSAR_PREFIX_c": "4"})
    assert run.returncode == 0, run.stderr
    assert path.read_text() == "a=1\n\nb=3\n"


def test_the_charts_index_volume_becomes_index_dirs(tmp_path):
    """bookkeeper.volumes.index.enabled: the chart sets indexDirectories to the index
    volume's mount path, and the bookie keeps its RocksDB indexes there (index_dirs)."""
    from bookie import bkconf  # noqa: PLC0415

    env = chart_environment("127.0.0.1:2181", root="/pulsar/data/bookkeeper",
                            index_dir="/pulsar/data/bookkeeper/index")
    env["allowLoopback"] = "true"  # this test machine's name resolves to 127.0.0.1
    path, _, _ = _applied(tmp_path, env)
    config, sources, _ = bkconf.load_settings(str(path), environ={})
    assert config.ledger_dirs_current == ("/pulsar/data/bookkeeper/ledgers/current",)
    assert config.index_dirs_current == ("/pulsar/data/bookkeeper/index/current",)
    assert sources["index_dirs"].startswith("bookkeeper.conf:")
    path.write_text(path.read_text().replace("indexDirectories=/pulsar/data/bookkeeper/index",
                                             "indexDirectories=/i1,/i2"))
    result = subprocess.run(
        [sys.executable, "-m", "bookie", "config", "show", "--conf", str(path)],
        env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT, capture_output=True,
        text=True, timeout=60)
    assert result.returncode == 78
    assert "indexDirectories=/i1,/i2: 2 dir(s) but ledgerDirectories has 1" in result.stderr
