"""``bookkeeper``: Apache BookKeeper's launcher (bin/bookkeeper) for this bookie, so that the
commands a Pulsar helm chart or a BookKeeper runbook types run unchanged:

    bookkeeper shell [-conf FILE] COMMAND [flags]   bookie shell COMMAND (BookKeeper's names)
    bookkeeper bookie [flags]                        bookie serve --conf FILE [flags]
    bookkeeper autorecovery [flags]                  bookie autorecovery --conf FILE [flags]

This is an entry point (pyproject.toml [project.scripts]); nothing imports it.

Invariants:
    BE1. The configuration file is BookKeeper's: ``-conf FILE`` (shell), else
         ``$BOOKIE_CONF``, else ``conf/bookkeeper.conf`` (Pulsar's image, which the chart
         fills with apply-config-from-env.py) or ``conf/bk_server.conf`` (BookKeeper's) in
         the working directory, the first that exists; with none, the settings come from
         BOOKIE_* and --config alone. An explicit ``-conf`` wins over ``$BOOKIE_CONF`` (in
         BookKeeper's script the variable's value comes first and wins).
    BE2. The launcher's own variables (BOOKIE_MEM, BOOKIE_CONF, BOOKIE_EXTRA_OPTS...,
         bk_settings.LAUNCHER_VARIABLES) are for a JVM and are dropped before the settings
         are read: ``bookie`` refuses unknown BOOKIE_* names, and the chart exports
         BOOKIE_MEM before these commands.
    BE3. The exit code is the command's: the shell's BookKeeper-named commands exit as
         BookKeeper's shell (bookie/shell/bk_settings.py BS2); ``bookie``'s otherwise.
"""

from __future__ import annotations

import os
import sys

from bookie.shell.bk_settings import EXIT_BK_FAILURE, LAUNCHER_VARIABLES

DEFAULT_CONFS = ("conf/bookkeeper.conf", "conf/bk_server.conf")
#: bookkeeper shell's own options before the command: (name, takes a value)
_SHELL_OPTIONS = {"-conf": True, "--conf": True, "-ledgeridformat": True,
                  "-entryformat": True, "-localbookie": False}

USAGE = """Usage: bookkeeper <command>
where command is one of:
    bookie              Run a bookie server (bookie serve)
    autorecovery        Run AutoRecovery service (bookie autorecovery)
    shell               Run shell for admin commands (bookie shell)
    help                This help message

Environment variables:
   BOOKIE_CONF            Configuration file (default: conf/bookkeeper.conf or
                          conf/bk_server.conf if one exists)
"""


def _conf_from_environment() -> str | None:
    """BE1, after an explicit -conf."""
    found = os.environ.get("BOOKIE_CONF")
    if found:
        return found
    return next((path for path in DEFAULT_CONFS if os.path.isfile(path)), None)


def _split_shell(argv: list[str]) -> tuple[str | None, list[str], str | None]:
    """(the -conf given, the command and its flags, an error) of ``bookkeeper shell ...``."""
    conf, index = None, 0
    while index < len(argv) and argv[index] in _SHELL_OPTIONS:
        name = argv[index]
        if name == "-localbookie":
            return None, [], ("-localbookie runs on BookKeeper's localbookie test cluster, "
                              "which this bookie has not: give -conf FILE")
        if index + 1 >= len(argv):
            return None, [], f"{name} needs a value"
        if name in ("-conf", "--conf"):
            conf = argv[index + 1]
        index += 2  # -ledgeridformat and -entryformat: accepted; ids print as decimals
    return conf, argv[index:], None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("help", "-h", "--help"):
        sys.stderr.write(USAGE)
        return 0 if argv else 1
    command, rest = argv[0], argv[1:]
    environment_conf = _conf_from_environment()
    for name in LAUNCHER_VARIABLES:  # BE2
        os.environ.pop(name, None)
    if command == "shell":
        conf, shell_argv, error = _split_shell(rest)
        if error is not None:
            print(f"bookkeeper shell: {error}", file=sys.stderr)
            return EXIT_BK_FAILURE
        from bookie.shell import main as shell_main  # noqa: PLC0415

        return shell_main(shell_argv, conf=conf or environment_conf)
    if command in ("bookie", "autorecovery"):
        from bookie.cli import main as bookie_main  # noqa: PLC0415

        given = any(arg in ("-c", "--conf") or arg.startswith("--conf=") for arg in rest)
        conf = [] if given or environment_conf is None else ["--conf", environment_conf]
        return bookie_main(["serve" if command == "bookie" else "autorecovery", *conf, *rest])
    print(f"bookkeeper: unknown command {command!r}; this bookie runs: bookie, "
          f"autorecovery, shell", file=sys.stderr)
    sys.stderr.write(USAGE)
    return 1


if __name__ == "__main__":
    sys.exit(main())
