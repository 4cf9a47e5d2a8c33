"""A refusal is never silent (docs/operations.md §3): every non-EOK answer of a listener is
counted, by its label values, in a dict the metrics collector reads (``bookie.stats``), and
logged at WARN with its reason and its peer, at most ``burst`` lines per ``interval_s`` per
label values.

The log is rate-limited and the count is not: a client retrying a refused add thousands of
times a second would otherwise bury every other line, while an operator still needs the
rate, which ``/metrics`` gives exactly. When a key's interval has passed, its next refusal
first logs how many of the interval's were not logged; a key that goes quiet keeps that
number to itself (its counter has it).

Log lines (logger ``bookie.refusals``)::

    bookie_port refused ADD_ENTRY EUA from 127.0.0.1:40312: <the error's message>
    http refused add_entry 403 EUA from 127.0.0.1:40314: <the error's message>
    bookie_port refused 250 ADD_ENTRY EIO from 127.0.0.1:40312: <...>   (a run of adds)
    bookie_port: 37 more ADD_ENTRY EUA refusals in the last 60 s were not logged

Listeners call ``refused`` on the event loop only, so there is no lock.
"""

from __future__ import annotations

import logging
import time

log = logging.getLogger("bookie.refusals")

BURST = 10
INTERVAL_S = 60.0


def peer_text(peer) -> str:
    """``host:port`` of a transport's peername (``[host]:port`` for IPv6), else as given."""
    if isinstance(peer, tuple) and len(peer) >= 2:
        host, port = peer[0], peer[1]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    return str(peer)


class _Window:
    __slots__ = ("start", "logged", "suppressed")

    def __init__(self, start: float) -> None:
        self.start, self.logged, self.suppressed = start, 0, 0


class RefusalLog:
    """One listener's refusals: ``counts[key] += count`` always, a WARN line when the key's
    window has room. ``clock`` is injectable so the limiter's test needs no sleeps."""

    def __init__(self, listener: str, counts: dict, burst: int = BURST,
                 interval_s: float = INTERVAL_S, clock=time.monotonic,
                 logger: logging.Logger = log) -> None:
        self.listener = listener
        self.counts = counts
        self.burst, self.interval_s, self.clock, self.log = burst, interval_s, clock, logger
        self.windows: dict[tuple, _Window] = {}

    def refused(self, key: tuple[str, ...], reason, peer, count: int = 1) -> None:
        """``count`` answers with label values ``key`` (op, then status), refused for
        ``reason`` (formatted only when logged) to ``peer`` (a peername or text)."""
        self.counts[key] = self.counts.get(key, 0) + count
        now = self.clock()
        window = self.windows.get(key)
        if window is None:
            window = self.windows[key] = _Window(now)
        elif now - window.start >= self.interval_s:
            if window.suppressed:
                self.log.warning("%s: %d more %s refusals in the last %.0f s were not logged",
                                 self.listener, window.suppressed, " ".join(key),
                                 now - window.start)
            window.start, window.logged, window.suppressed = now, 0, 0
        if window.logged < self.burst:
            window.logged += 1
            what = " ".join(key) if count == 1 else f"{count} {' '.join(key)}"
            self.log.warning("%s refused %s from %s: %s", self.listener, what,
                             peer_text(peer), reason)
        else:
            window.suppressed += count
