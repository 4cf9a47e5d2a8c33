"""What ``bookie shell`` commands print: records for humans or as JSON lines, and progress.

Conventions (docs/http-api.md "CLI"):
    - stdout carries the command's result: one human line per record by default, or with
      ``--json`` one JSON object per line, each with a ``"type"`` (``record``, ``entry``,
      ``problem``, ``end``, ``summary``...). Commands that report one thing print one object.
    - stderr carries progress and errors, never results, so ``--json`` output stays parseable.
    - Exit codes: 0 clean, 1 problems found (damage, mismatch, missing data), 2 usage or I/O
      error (the tool could not do its job).

Progress: on a terminal a bar redrawn in place at most every ``TTY_REDRAW_S``; otherwise,
for work that lasts, one line every ``interval_s`` (nothing at all for short runs).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Callable, TextIO

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_ERROR = 2

TTY_REDRAW_S = 0.2
PROGRESS_INTERVAL_S = 5.0
_BAR_WIDTH = 30
MiB = 1 << 20


class Output:
    """Prints records as text or JSON lines; counts problems for the exit code."""

    def __init__(self, json_mode: bool, out: TextIO | None = None,
                 err: TextIO | None = None) -> None:
        self.json_mode = json_mode
        self.out = out if out is not None else sys.stdout
        self.err = err if err is not None else sys.stderr
        self.problems = 0

    def emit(self, record: dict, text: str | None = None) -> None:
        """One record: ``record`` as a JSON line, or ``text`` (skipped if None) for humans."""
        if self.json_mode:
            self.out.write(json.dumps(record, separators=(",", ":")) + "\n")
        elif text is not None:
            self.out.write(text + "\n")

    def text(self, line: str) -> None:
        """A line for humans only (headings, blank lines)."""
        if not self.json_mode:
            self.out.write(line + "\n")

    def problem(self, record: dict, text: str) -> None:
        """A problem found: printed like a record and counted for exit code 1."""
        self.problems += 1
        record = {**record, "type": "problem"}
        self.emit(record, "PROBLEM " + text)

    def scan_end(self, path: str, end, corrupt: bool = False, *, quiet_if_clean: bool = False,
                 **extra) -> None:
        """How a scan ended (a ``bookie.errors.ScanEnd``): a record if clean, else a problem,
        torn or (``corrupt``) corrupt, named with its offset."""
        if end.clean:
            if not quiet_if_clean:
                self.emit({"type": "end", "file": path, "offset": end.offset, "status": "clean",
                           "reason": end.reason, "cutBytes": 0, **extra},
                          f"end: clean at offset {end.offset}")
            return
        status = "corrupt" if corrupt else "torn"
        self.problem({"file": path, "offset": end.offset, "status": status,
                      "reason": end.reason, "cutBytes": end.cut_bytes, **extra},
                     f"{path}: {status} at offset {end.offset}: {end.reason} "
                     f"({end.cut_bytes} bytes from there not read)")

    def error(self, message: str) -> None:
        self.err.write(f"bookie shell: error: {message}\n")

    def exit_code(self) -> int:
        return EXIT_PROBLEMS if self.problems else EXIT_OK


class Progress:
    """Progress of long work on stderr: a bar on a TTY, periodic lines otherwise."""

    def __init__(self, label: str, stream: TextIO | None = None, *, tty: bool | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 interval_s: float = PROGRESS_INTERVAL_S, enabled: bool = True) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.tty = tty if tty is not None else bool(isatty and isatty())
        self.clock = clock
        self.interval_s = TTY_REDRAW_S if self.tty else interval_s
        self.enabled = enabled
        self.started = clock()
        self._last_shown = self.started
        self._drawn = False

    def update(self, done: int, total: int | None = None, unit: str = "bytes") -> None:
        if not self.enabled:
            return
        now = self.clock()
        if now - self._last_shown < self.interval_s:
            return
        self._last_shown = now
        line = self._describe(done, total, unit, now - self.started)
        if self.tty:
            self.stream.write("\r" + line + "\x1b[K")
        else:
            self.stream.write(line + "\n")
        self.stream.flush()
        self._drawn = True

    def finish(self) -> None:
        """End the bar's line on a TTY; periodic lines need no ending."""
        if self.tty and self._drawn:
            self.stream.write("\n")
            self.stream.flush()

    def _describe(self, done: int, total: int | None, unit: str, elapsed: float) -> str:
        rate = done / elapsed if elapsed > 0 else 0.0
        if unit == "bytes":
            amount = f"{done / MiB:.0f}" + (f"/{total / MiB:.0f}" if total else "") + " MiB"
            speed = f"{rate / MiB:.0f} MiB/s"
        else:
            amount = f"{done}" + (f"/{total}" if total else "") + f" {unit}"
            speed = f"{rate:.0f} {unit}/s"
        if not total:
            return f"{self.label}: {amount}, {speed}"
        fraction = min(1.0, done / total)
        if self.tty:
            filled = int(fraction * _BAR_WIDTH)
            bar = "#" * filled + "." * (_BAR_WIDTH - filled)
            return f"{self.label} [{bar}] {fraction:4.0%} {amount} {speed}"
        return f"{self.label}: {fraction:.0%} ({amount}, {speed})"


def human_bytes(count: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", MiB), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count} B"
