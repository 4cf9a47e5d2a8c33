"""``apply-config-from-env``: BookKeeper keys from the environment, written into a
properties file as Apache Pulsar's image applies them (its ``bin/apply-config-from-env.py``,
run by the Pulsar helm chart before ``bin/pulsar bookie``; docs/operations.md §8.1).

Rules, as Pulsar's script has them:

* CE1 A file's keys are its ``key=value`` lines, and its commented ones (``# key=value``):
  a variable named as a commented key uncomments it in place. Where a key appears on several
  lines, its last line is the one rewritten.
* CE2 A variable named exactly as a key of the file replaces that line's value. A variable
  named ``<prefix><key>`` (``PULSAR_PREFIX_`` by default) replaces it too, or, for a key the
  file does not have, adds ``key=value`` at the end; the prefixed one wins over the plain one.
  Values are stripped of surrounding blanks.
* CE3 Each change is printed, one line per key; a key whose name holds "password" (or one of
  Pulsar's secret keys) shows ``********`` instead of its value.

Beyond Pulsar's script:

* CE4 The file is replaced atomically (bookie/disk.py's atomic_replace: ``<file>.tmp``
  written and fsynced, then renamed over it): a kill mid-way leaves the old file or the new,
  never half of one; its mode is kept.
* CE5 A file that cannot be read or written is one line on stderr and exit 2, not a traceback;
  the files after it are not touched.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, Mapping

from bookie.disk import OsDisk, atomic_replace

PREFIX = "PULSAR_PREFIX_"
#: Pulsar's script hides these values too (CE3).
SECRET_KEYS = frozenset({"brokerClientAuthenticationParameters",
                         "bookkeeperClientAuthenticationParameters", "tokenSecretKey"})
EXIT_OK, EXIT_ERROR = 0, 2


def _shown(key: str, value: str) -> str:
    return "********" if "password" in key.lower() or key in SECRET_KEYS else value


def _keys(lines: list[str]) -> dict[str, int]:
    """CE1: key -> index of its last line, commented keys included."""
    keys = {}
    for index, line in enumerate(lines):
        text = line.strip()
        if "=" not in text:
            continue
        key = text.split("=", 1)[0]
        if key.startswith("#"):
            key = key[1:]
        keys[key.strip()] = index
    return keys


def apply_text(text: str, environ: Mapping[str, str], name: str = "conf",
               prefix: str = PREFIX, say: Callable[[str], None] = print) -> str:
    """The file's new text (CE1-CE3); ``say`` gets one line per change."""
    lines = text.splitlines(keepends=True)
    keys = _keys(lines)
    for var in sorted(environ):  # CE2: the plain names first, as Pulsar's script
        if var in keys:
            value = environ[var].strip()
            say(f"[{name}] Applying config {var} = {_shown(var, value)}")
            lines[keys[var]] = f"{var}={value}\n"
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    lines.append("\n")  # Pulsar's script always ends the kept part with an empty line
    for var in sorted(environ):
        if not var.startswith(prefix) or var == prefix:
            continue
        key, value = var[len(prefix):], environ[var].strip()
        if key in keys:
            say(f"[{name}] Updating config {key} = {_shown(key, value)}")
            lines[keys[key]] = f"{key}={value}\n"
        else:
            say(f"[{name}] Adding config {key} = {_shown(key, value)}")
            keys[key] = len(lines)
            lines.append(f"{key}={value}\n")
    return "".join(lines)


def apply_file(path: str, environ: Mapping[str, str], prefix: str = PREFIX,
               say: Callable[[str], None] = print) -> None:
    """CE4: rewrite ``path`` in place, atomically. OSError propagates (CE5 is the CLI's)."""
    # latin-1 is java.util.Properties' encoding (bookie/bkconf.py reads the file so), and
    # it round-trips every byte: nothing of the file is lost to a decode error.
    with open(path, encoding="latin-1") as handle:
        text = handle.read()
    new = apply_text(text, environ, path, prefix, say)
    mode = os.stat(path).st_mode & 0o7777
    atomic_replace(OsDisk(), path, new.encode("latin-1"))  # <path>.tmp, fsync, rename
    os.chmod(path, mode)


def main(argv: list[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="apply-config-from-env",
        description="Write BookKeeper keys from the environment into properties files, as "
        "Apache Pulsar's image does before it starts a bookie: a variable named as a key of "
        "the file (commented keys too) replaces its value; PREFIX<key> replaces it or adds "
        "it at the end. Each file is replaced atomically. Exit 0, or 2 when a file cannot "
        "be read or written (the files after it are left as they are).")
    parser.add_argument("--prefix", default=PREFIX,
                        help=f"prefix of the variables that may add keys (default {PREFIX})")
    parser.add_argument("conf_files", nargs="+", metavar="FILE", help="properties files")
    args = parser.parse_args(argv)
    environ = os.environ if environ is None else environ
    for path in args.conf_files:
        try:
            apply_file(path, environ, args.prefix)
        except OSError as exc:  # CE5
            print(f"apply-config-from-env: {path}: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_ERROR
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
