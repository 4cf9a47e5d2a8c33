"""scripts/interop/bk_netty.py: which Netty jars a BookKeeper bookie is given for epoll, and how a
bookie's transport is told (issue 41, "the peer at its best"). The jars are PySpark's own
(its wheel is a test dependency); the process whose maps are read is a real one that has
Netty's epoll library loaded, as a JVM over epoll has."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile

import pyspark
import pytest

from scripts.interop import bk_netty

JARS = os.path.join(os.path.dirname(pyspark.__file__), "jars")


def test_the_jars_are_this_machines_and_the_epoll_library_is_among_them():
    jars = [os.path.basename(path) for path in bk_netty.netty_jars(JARS)]
    assert any(name.startswith("netty-transport-native-epoll") and "linux-x86_64" in name
               for name in jars)
    assert any(name.startswith("netty-transport-classes-epoll") for name in jars)
    for other in ("aarch_64", "riscv64", "osx", "windows", "netty-all", "tcnative"):
        assert not any(other in name for name in jars), other


def test_a_directory_without_the_epoll_library_is_refused(tmp_path):
    (tmp_path / "netty-common-4.2.13.Final.jar").write_bytes(b"")
    with pytest.raises(SystemExit, match="netty-transport-native-epoll"):
        bk_netty.netty_jars(str(tmp_path))


def test_an_epoll_side_puts_netty_on_the_boot_class_path_and_needs_the_jars():
    base = "-Xms1g -Xmx1g"
    assert bk_netty.bookie_java_opts(base, False, {bk_netty.ENV: JARS}) == base
    opts = bk_netty.bookie_java_opts(base, True, {bk_netty.ENV: JARS})
    assert opts.startswith(base + " -Xbootclasspath/a:")
    assert opts.split(":", 1)[1].split(":") == bk_netty.netty_jars(JARS)
    with pytest.raises(SystemExit, match=bk_netty.ENV):
        bk_netty.bookie_java_opts(base, True, {})


@pytest.fixture
def epoll_process(tmp_path):
    """A process with Netty's epoll library mapped (dlopen'ed, as Netty's loader does)."""
    jar = next(path for path in bk_netty.netty_jars(JARS) if "native-epoll" in path)
    with zipfile.ZipFile(jar) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".so"))
        library = tmp_path / os.path.basename(name)
        library.write_bytes(archive.read(name))
    proc = subprocess.Popen([sys.executable, "-c", f"import ctypes, sys; "
                             f"ctypes.CDLL({str(library)!r}); print('up', flush=True); "
                             "sys.stdin.read()"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "up\n"
    yield proc.pid
    proc.stdin.close()
    proc.wait(30)


def test_a_bookie_is_epoll_when_the_library_is_loaded_and_its_log_has_no_fallback(
        epoll_process, tmp_path):
    log = tmp_path / "bookie.log"
    log.write_text("INFO - bookie started\n")
    assert bk_netty.transport(epoll_process, str(log)) == "epoll"
    assert bk_netty.check(epoll_process, str(log), True) == "epoll"
    log.write_text(f"WARN - [main:EventLoopUtil@96] - {bk_netty.FALLBACK} {{exception=x}}\n")
    assert bk_netty.transport(epoll_process, str(log)) == "nio"


def test_a_bookie_without_the_library_is_nio_and_fails_the_check_when_epoll_was_asked(
        tmp_path):
    log = tmp_path / "bookie.log"
    log.write_text("INFO - bookie started\n")
    assert bk_netty.transport(os.getpid(), str(log)) == "nio"
    assert bk_netty.check(os.getpid(), str(log), False) == "nio"
    bk_netty.SEEN.clear()
    bk_netty.checked("db", os.getpid(), str(log), False)
    assert bk_netty.seen() == "db nio"
    with pytest.raises(RuntimeError, match="runs NIO"):
        bk_netty.check(os.getpid(), str(log), True)
