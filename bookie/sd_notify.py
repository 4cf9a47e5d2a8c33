"""The daemon's side of systemd's notify protocol (sd_notify(3)), without libsystemd.

systemd passes ``NOTIFY_SOCKET`` (a path, or ``@name`` for an abstract socket) to a unit of
``Type=notify``; the daemon sends newline-separated ``KEY=VALUE`` assignments as one datagram
each. The bookie sends:

    STATUS=...               replay progress, then "serving", then "stopping"
    EXTEND_TIMEOUT_USEC=N    with each replay STATUS, so a long replay is not killed by
                             TimeoutStartSec while it still makes progress
    READY=1                  once replay is done (and, in a cluster, the bookie registered)
    WATCHDOG=1               from the event loop at half of WATCHDOG_USEC (cli.py)
    STOPPING=1               at SIGTERM, before draining

Invariants:
    SD1. Without NOTIFY_SOCKET every call is a no-op: a bookie started by hand or by a
         ``Type=simple`` unit behaves exactly as before.
    SD2. A send never raises: the service manager going away (ECONNREFUSED, ENOENT) must not
         take a storage daemon down. Failures are logged once.
    SD3. The watchdog is armed only for this process (``WATCHDOG_PID`` unset or ours), and
         pinged only from the event loop itself, so a loop that stops turning stops the pings
         and systemd restarts the bookie (a side thread would keep a stuck daemon alive).

Thread-safety: ``Notifier.send`` may be called from any thread (one ``sendto`` per call).
"""

from __future__ import annotations

import logging
import os
import socket

log = logging.getLogger("bookie.sd_notify")


def socket_address(value: str) -> str | bytes:
    """NOTIFY_SOCKET as an AF_UNIX address: '@name' is the abstract socket '\\0name'."""
    if value.startswith("@"):
        return b"\0" + value[1:].encode()
    return value


def watchdog_interval_s(environ, pid: int) -> float | None:
    """Half of WATCHDOG_USEC in seconds when the watchdog is armed for ``pid`` (SD3)."""
    usec = environ.get("WATCHDOG_USEC", "")
    owner = environ.get("WATCHDOG_PID", "")
    if not usec.isdigit() or int(usec) == 0:
        return None
    if owner and (not owner.isdigit() or int(owner) != pid):
        return None
    return int(usec) / 2 / 1e6


class Notifier:
    """Sends sd_notify datagrams to NOTIFY_SOCKET; a no-op without it (SD1)."""

    def __init__(self, environ=None) -> None:
        environ = os.environ if environ is None else environ
        target = environ.get("NOTIFY_SOCKET", "")
        self.address = socket_address(target) if target else None
        self.watchdog_s = watchdog_interval_s(environ, os.getpid()) if target else None
        self._socket = None
        self._failed = False
        if self.address is not None:
            self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)

    @property
    def enabled(self) -> bool:
        return self._socket is not None

    def send(self, **fields: str | int) -> bool:
        """One datagram of ``KEY=VALUE`` lines (keys upper-cased); False if not sent (SD2)."""
        if self._socket is None:
            return False
        text = "\n".join(f"{key.upper()}={value}" for key, value in fields.items())
        try:
            self._socket.sendto(text.encode(), self.address)
            return True
        except OSError as exc:
            if not self._failed:
                log.warning("sd_notify to %r failed: %s (further failures not logged)",
                            self.address, exc)
            self._failed = True
            return False

    def status(self, text: str, **more: str | int) -> bool:
        return self.send(status=text.replace("\n", " "), **more)

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None
