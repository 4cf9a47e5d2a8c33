"""A listener that cannot bind, said in one line: which setting, which port, the way out.

``bookie serve`` binds up to three listeners (settings ``port``, ``bookie_port``,
``admin_port``); the OSError of a failed bind becomes a ``ListenRefused`` whose message
names the setting and its flag, and whose exit code follows bookie/cli.py's: a port that
another process holds is a refused start (1: the configuration is valid, the machine is
busy; the same start succeeds once that process is gone), an address that is not this
machine's or a port the bookie may not bind is a bad configuration (78)."""

from __future__ import annotations

import errno

from bookie.config import EXIT_BAD_CONFIG

EXIT_REFUSED = 1

#: Each listener's setting: what it is called in a message.
LISTENERS = {"port": "HTTP port", "bookie_port": "BookKeeper protocol port (bookie_port)",
             "admin_port": "admin API port (admin_port)"}


class ListenRefused(Exception):
    """A bind that failed; ``str()`` is the whole line after ``bookie: ``."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def listen_refusal(exc: OSError, setting: str, host: str, port: int | None) -> ListenRefused:
    what = LISTENERS[setting]
    flag = "--" + setting.replace("_", "-")
    way_out = (f"set {flag} (BOOKIE_{setting.upper()}, {setting} in --config) to a free port, "
               f"or 0 to pick one")
    if exc.errno == errno.EADDRINUSE:
        return ListenRefused(f"refused to start: {what} {port} on {host} is in use (another "
                             f"bookie?): stop that process or {way_out}", EXIT_REFUSED)
    if exc.errno == errno.EADDRNOTAVAIL:
        return ListenRefused(f"bad configuration: host {host} is not an address of this "
                             f"machine: set --host (BOOKIE_HOST, host in --config) to one of "
                             f"its addresses", EXIT_BAD_CONFIG)
    if exc.errno == errno.EACCES:
        return ListenRefused(f"bad configuration: {what} {port} on {host}: permission denied "
                             f"(a port below 1024 needs privileges): {way_out}",
                             EXIT_BAD_CONFIG)
    return ListenRefused(f"refused to start: {what} {port} on {host}: "
                         f"{exc.strerror or exc}: {way_out}", EXIT_REFUSED)
