"""Configuration: defaults < TOML < BOOKIE_* env < flags; unknown keys and bad ranges refused."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bookie.config import EXIT_BAD_CONFIG, SETTINGS, BookieConfig, ConfigError, load_config
from bookie.config_render import render_config
from tests.support.servers import ROOT


def test_layers_apply_in_order_file_env_flag(tmp_path):
    toml = tmp_path / "bookie.toml"
    toml.write_text('port = 4000\ngroup_max_wait_ms = 5\njournal_max_bytes = "64MiB"\n')
    config, sources = load_config(str(toml), flags={"port": "5000"},
                                  environ={"BOOKIE_GROUP_MAX_WAIT_MS": "3"})
    assert (config.port, config.group_max_wait_ms, config.journal_max_bytes) == (
        5000, 3.0, 64 * 1024 * 1024)
    assert sources["port"] == "flag" and sources["group_max_wait_ms"] == "env"
    assert sources["journal_max_bytes"].startswith("file ") and sources["host"] == "default"


def test_every_api_md_setting_has_three_spellings():
    names = {s.name for s in SETTINGS}
    for name in ("data_dir", "host", "port", "admin_token", "journal_max_bytes",
                 "entrylog_max_bytes", "checkpoint_interval_ms", "group_max_wait_ms",
                 "max_entry_size", "verify_digest"):
        assert name in names
        config, _ = load_config(None, environ={f"BOOKIE_{name.upper()}": "1"}
                                if name in ("verify_digest",) else {})
        assert hasattr(config, name)


@pytest.mark.parametrize("text, message", [
    ("no_such_setting = 1\n", "unknown setting 'no_such_setting'"),
    ("port = 70000\n", "port = 70000 is above its maximum"),
    ("verify_digest = 3\n", "verify_digest"),
    ("log_format = \"xml\"\n", "is not one of text, json"),
    ("port = \n", "config file"),
])
def test_bad_config_files_are_refused_naming_the_key(tmp_path, text, message):
    toml = tmp_path / "bad.toml"
    toml.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_config(str(toml), environ={})


def test_unknown_environment_variable_is_refused():
    with pytest.raises(ConfigError, match="BOOKIE_PROT"):
        load_config(None, environ={"BOOKIE_PROT": "1"})


def test_config_show_redacts_the_token_and_names_sources():
    config, sources = load_config(None, flags={"admin_token": "hunter2"}, environ={})
    text = render_config(config, sources)
    assert "hunter2" not in text and 'admin_token = "<redacted>"  # flag' in text
    assert "port = 3180  # default" in text


def test_bad_config_exits_with_its_own_code(tmp_path):
    result = subprocess.run([sys.executable, "-m", "bookie", "serve", "--port", "99999",
                             "--data-dir", str(tmp_path)], capture_output=True, cwd=ROOT,
                            timeout=60)
    assert result.returncode == EXIT_BAD_CONFIG
    assert b"port = 99999 is above its maximum" in result.stderr


def test_config_show_cli(tmp_path):
    result = subprocess.run([sys.executable, "-m", "bookie", "config", "show",
                             "--entrylog-max-bytes", "1MiB"], capture_output=True, cwd=ROOT,
                            timeout=60, env={"BOOKIE_PORT": "4321", "PATH": "/usr/bin"})
    assert result.returncode == 0, result.stderr
    assert b"entrylog_max_bytes = 1048576  # flag" in result.stdout
    assert b"port = 4321  # env" in result.stdout


def test_disk_thresholds_must_be_ordered():
    with pytest.raises(ConfigError, match="disk_usage_lwm_threshold"):
        BookieConfig().replace(disk_usage_threshold=0.5)


def test_the_request_budget_of_bookie_port_must_hold_one_whole_frame():
    """bk_budget.py PB3: a frame is reserved whole; a budget smaller than the largest frame
    is refused at start, naming both settings."""
    with pytest.raises(ConfigError, match="bookie_request_bytes_max.*max_entry_size"):
        BookieConfig().replace(max_entry_size=8 << 20, bookie_request_bytes_max=8 << 20)
    assert BookieConfig().replace(bookie_request_bytes_max=(5 << 20) + 4096)


def test_index_dirs_pair_with_the_ledger_dirs_one_each():
    """DbLedgerStorage: ledger dir i's indexes in index dir i; another count is refused
    ("ledger and index dirs size not matched"), and an index dir is nobody else's dir."""
    config = BookieConfig(ledger_dirs="/l0,/l1", index_dirs="/i0, /l1")
    assert config.index_dirs_current == ("/i0/current", "/l1/current")
    assert config.separate_index_dirs == ("/i0/current",)
    assert BookieConfig(ledger_dirs="/l0").index_dirs_current == ("/l0/current",)
    with pytest.raises(ConfigError, match="index_dirs names 1 dir.* but ledger_dirs 2"):
        config.replace(index_dirs="/i0")
    with pytest.raises(ConfigError, match="index dir /l1 and ledger dir /l1 overlap"):
        config.replace(index_dirs="/l1,/l0")
    with pytest.raises(ConfigError, match="index dir /j and journal dir /j overlap"):
        config.replace(index_dirs="/j,/l1", journal_dirs="/j")
