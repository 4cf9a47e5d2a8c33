"""``bookie serve`` as a new user meets it (issue 54): one line for a port in use or a TOML
file given to ``-c``, a short grouped ``--help``, "listening" only once it serves, JSON logs
JSON from the first line, quiet idle checkpoints and a "stopped" line at a clean stop."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from api.client import BookieClient
from bookie.entry import frame_entry, master_key
from bookie.settings import SETTINGS, SETTINGS_BY_NAME
from bookie.setting_flags import COMMON, TOPICS, flag_help, flag_of
from tests.support.servers import ROOT, Daemon

KEY = master_key(b"face")


def _bookie(*args: str, timeout_s: float = 60.0) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bookie", *args], capture_output=True,
                          text=True, timeout=timeout_s, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": ROOT})


def _held_port() -> socket.socket:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    return holder


def _refusal(done: subprocess.CompletedProcess) -> str:
    """The one ``bookie:`` line of stderr (log lines may come before it), no traceback."""
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("bookie:")]
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.mark.parametrize("setting,flag,what", [
    ("port", "--port", "HTTP port"),
    ("bookie_port", "--bookie-port", "BookKeeper protocol port (bookie_port)"),
    ("admin_port", "--admin-port", "admin API port (admin_port)")])
def test_a_port_in_use_refuses_the_start_in_one_line_naming_the_setting(tmp_path, setting,
                                                                         flag, what):
    with _held_port() as holder:
        port = holder.getsockname()[1]
        others = [] if setting == "port" else ["--port", "0"]
        done = _bookie("serve", "--data-dir", str(tmp_path / "data"), *others, flag, str(port))
    assert done.returncode == 1, done.stderr
    assert _refusal(done) == (
        f"bookie: refused to start: {what} {port} on 127.0.0.1 is in use (another bookie?): "
        f"stop that process or set {flag} (BOOKIE_{setting.upper()}, {setting} in --config) "
        f"to a free port, or 0 to pick one")
    assert done.stdout == ""  # no "listening" for a bookie that does not serve


@pytest.mark.parametrize("name,text,why", [
    ("my.toml", "port = 3190\n", "its name ends in .toml"),
    ("bookie.conf", 'data_dir = "/srv/bookie"\nport = 3190\n',
     'data_dir = "/srv/bookie" is a TOML string'),
    ("bookie.conf", "[bookie]\nport = 3190\n", "[bookie] is a TOML table"),
    ("bookie.conf", "port = 3190\n", "port is a setting of --config, not a bk_server.conf key")])
def test_a_toml_file_given_to_conf_is_refused_pointing_at_config(tmp_path, name, text, why):
    path = tmp_path / name
    path.write_text(text)
    for spelling in ("-c", "--conf"):
        done = _bookie("serve", "--data-dir", str(tmp_path / "data"), spelling, str(path))
        assert done.returncode == 78, done.stderr
        assert _refusal(done) == (
            f"bookie: bad configuration: {path} looks like TOML ({why}): use --config "
            f"{path} (-c/--conf is BookKeeper's bk_server.conf)")
        assert done.stdout == ""
        assert not (tmp_path / "data").exists()  # refused before touching a file


def test_bk_server_conf_lines_that_also_parse_as_toml_still_load(tmp_path):
    path = tmp_path / "bk_server.conf"  # every line valid TOML too: numbers and booleans
    path.write_text("# a bookie\nbookiePort=3181\nallowLoopback=true\njournalMaxSizeMB=512\n")
    done = _bookie("config", "show", "-c", str(path))
    assert done.returncode == 0, done.stderr
    assert "bookie_port = 3181" in done.stdout and "bk_server.conf:2" in done.stdout
    shipped = _bookie("config", "show", "--conf", f"{ROOT}/tests/data/bk_server.conf")
    assert shipped.returncode == 0, shipped.stderr


def _squeezed(text: str) -> str:
    return "".join(text.split())  # argparse wraps help text, at spaces and hyphens


def test_help_shows_the_common_flags_by_topic_and_help_all_every_flag_with_its_help():
    short = _bookie("serve", "--help")
    assert short.returncode == 0
    assert len(short.stdout.splitlines()) <= 80, short.stdout
    assert "--help-all lists every one, by topic" in " ".join(short.stdout.split())
    for setting in SETTINGS:
        shown = f"  {flag_of(setting.name)} " in short.stdout
        assert shown == (setting.name in COMMON), setting.name
    full = _bookie("serve", "--help-all")
    assert full.returncode == 0
    titles = [f"{title} settings:" for title, _, _ in TOPICS]
    assert [line for line in full.stdout.splitlines() if line in titles] == titles
    body = _squeezed(full.stdout)
    for setting in SETTINGS:  # each flag once, with its whole help text after it
        assert full.stdout.count(f"  {flag_of(setting.name)} ") == 1, setting.name
        assert _squeezed(f"{flag_of(setting.name)} {setting.kind.__name__.upper()}"
                         f"{flag_help(setting)}") in body, setting.name
    for _, description, names in TOPICS:  # a topic's flags under its title, in order
        at = body.index(_squeezed(description))
        for name in names:
            kind = SETTINGS_BY_NAME[name].kind.__name__.upper()
            at = body.index(_squeezed(flag_of(name)) + kind, at)
    # a flag --help does not show still works
    shown = _bookie("config", "show", "--bookie-add-wait-ms", "5")
    assert shown.returncode == 0 and "bookie_add_wait_ms = 5" in shown.stdout, shown.stdout


def test_a_refused_start_prints_no_listening_line(tmp_path):
    data_dir = str(tmp_path / "data")
    assert Daemon(data_dir).start().terminate() == 0
    identity = os.path.join(data_dir, "ledgers", "current", "IDENTITY")
    with open(identity) as handle:
        text = handle.read()
    with open(identity, "w") as handle:
        handle.write(text.replace('"format": 1', '"format": 7'))
    done = _bookie("serve", "--data-dir", data_dir, "--port", "0", "--log-format", "json")
    assert done.returncode == 1
    assert done.stdout == ""  # it never served: no ready line
    logged = [json.loads(line) for line in done.stderr.splitlines()]  # JSON, every line
    assert any("format version 7" in line["msg"] for line in logged if line["level"] == "error")
    assert not any("listening" in line["msg"] or "serving" in line["msg"] for line in logged)


def _metric(url: str, name: str) -> float:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as reply:
        for line in reply.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    raise AssertionError(f"no metric {name}")


def _until(check, bound_s: float = 60.0) -> None:
    deadline = time.monotonic() + bound_s
    while not check():
        assert time.monotonic() < deadline, f"{check} not true within {bound_s}s"
        time.sleep(0.02)  # noqa: sleep-ok (bounded poll of another process's metrics)


async def test_json_logs_from_the_first_line_quiet_idle_checkpoints_and_a_stopped_line(
        tmp_path):
    daemon = Daemon(str(tmp_path / "data"), "--log-format", "json",
                    "--checkpoint-interval-ms", "50").start()
    done = _metric(daemon.url, "bookie_checkpoint_total")
    _until(lambda: _metric(daemon.url, "bookie_checkpoint_total") >= done + 5)  # idle ones
    async with BookieClient(daemon.url) as client:
        for i in range(3):
            await client.add_entry(1, i, frame_entry(1, i, i - 1, i, b"x" * 10), KEY)
    written = _metric(daemon.url, "bookie_checkpoint_total")
    _until(lambda: _metric(daemon.url, "bookie_checkpoint_total") >= written + 5)
    assert daemon.terminate() == 0
    logged = [json.loads(line) for line in daemon.log_text().splitlines()]  # JSON, each line
    checkpoints = [line for line in logged if line["msg"].startswith("checkpoint:")]
    assert len(checkpoints) == 1, checkpoints  # the run that wrote the three entries only
    assert " 3 entries" in checkpoints[0]["msg"] and checkpoints[0]["level"] == "info"
    serving = [i for i, line in enumerate(logged) if line["msg"].startswith(
        f"bookie serving: HTTP on {daemon.url}")]
    ready = [i for i, line in enumerate(logged) if line["msg"].startswith("bookie ready in")]
    assert len(serving) == 1 and ready and ready[0] < serving[0]
    assert logged[-1]["level"] == "info" and logged[-1]["msg"].startswith(
        "bookie stopped cleanly after ")
    assert [line for line in logged if line["level"] not in ("info", "debug")] == []
