"""BookKeeper's bookie over Netty's native epoll transport, for the side-by-side benchmarks
(issue 41: "the peer at its best"; docs/bookkeeper-protocol.md §6).

A BookKeeper built on Debian's Netty 4.1.48 has no native epoll library, so its bookie falls
back to NIO (its log says "Could not use Netty Epoll event loop"). Netty 4.2's jars put on the
JVM's boot class path (``-Xbootclasspath/a``) are found before the launcher's class path (the
boot loader is asked first), so the same launcher's bookie then runs over epoll. PySpark's
wheel carries such jars (``pyspark/jars/netty-*-4.2.13.Final*.jar``, the linux-x86_64 epoll
library among them):

    BOOKKEEPER_NETTY_JARS=.venv/lib/python3.11/site-packages/pyspark/jars \\
        BOOKKEEPER_LAUNCHER=/path/to/bk .venv/bin/python scripts/bench/bench_bookkeeper.py ...

A side named ``db-epoll`` or ``sorted-epoll`` (``--storages``) runs its BookKeeper bookies on
the jars of ``BOOKKEEPER_NETTY_JARS``, and each is checked to serve over epoll (a bookie that
fell back to NIO fails the run: a weaker peer than asked for must not pass for the
stronger); ``db`` and ``sorted`` keep the launcher's Netty, so one run measures both
transports. BookKeeper's clients (the benchmark programs) keep the launcher's own Netty,
the same for every side.
"""

from __future__ import annotations

import glob
import os

ENV = "BOOKKEEPER_NETTY_JARS"
#: BookKeeper's EventLoopUtil logs this when it cannot use epoll and takes NIO.
FALLBACK = "Could not use Netty Epoll event loop"
#: Jars not for this machine (other platforms' native libraries), the empty netty-all
#: aggregate, and tcnative (TLS stays on the JDK's provider, as the launcher runs it).
_SKIP = ("aarch_64", "riscv64", "osx-", "windows-", "netty-all-", "tcnative")
#: The transports each BookKeeper side's bookies were seen to use this run (checked()).
SEEN: dict[str, set[str]] = {}


def netty_jars(directory: str) -> list[str]:
    """The Netty jars of ``directory`` a Linux x86-64 JVM needs, sorted."""
    jars = sorted(path for path in glob.glob(os.path.join(directory, "netty-*.jar"))
                  if not any(skip in os.path.basename(path) for skip in _SKIP))
    if not any("transport-native-epoll" in os.path.basename(path) for path in jars):
        raise SystemExit(f"{ENV}={directory}: no netty-transport-native-epoll jar for "
                         "linux-x86_64 there")
    return jars


def bookie_java_opts(base: str, epoll: bool, environ=os.environ) -> str:
    """``base`` JVM options, and for an epoll side Netty 4.2 first on the boot class path."""
    if not epoll:
        return base
    directory = environ.get(ENV)
    if not directory:
        raise SystemExit(f"an epoll side needs {ENV}=DIR, a directory of Netty 4.2 jars "
                         "(PySpark's pyspark/jars has them)")
    return f"{base} -Xbootclasspath/a:{':'.join(netty_jars(directory))}"


def transport(pid: int, log_path: str) -> str:
    """"epoll" when the bookie process ``pid`` has Netty's epoll library loaded and its
    log does not say it fell back, else "nio". Call it once the bookie serves."""
    try:
        with open(f"/proc/{pid}/maps") as maps:
            loaded = "netty_transport_native_epoll" in maps.read()
    except OSError:
        loaded = False
    with open(log_path, errors="replace") as log:
        fell_back = FALLBACK in log.read()
    return "epoll" if loaded and not fell_back else "nio"


def check(pid: int, log_path: str, epoll: bool) -> str:
    """The bookie's transport; raises when epoll was asked for and it runs NIO."""
    used = transport(pid, log_path)
    if epoll and used != "epoll":
        raise RuntimeError(f"an epoll side's bookie (pid {pid}, log {log_path}) runs NIO: "
                           "see its log for why epoll was not used")
    return used


def checked(side: str, pid: int, log_path: str, epoll: bool) -> None:
    """``check``, and the transport kept for ``seen`` under the side's name."""
    SEEN.setdefault(side, set()).add(check(pid, log_path, epoll))


def seen() -> str:
    """Each side's transports this run, for a report: "db nio, db-epoll epoll"."""
    return ", ".join(f"{side} {'/'.join(sorted(used))}" for side, used in SEEN.items()) \
        or "(none ran)"
