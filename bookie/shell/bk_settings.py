"""What the shell's BookKeeper-named commands (``whatisinstanceid``, ``bookieformat``,
``updatecookie``...) work on: the bookie's own settings, read as ``bookie serve`` reads them.

BookKeeper's ``bookkeeper shell`` reads one file, ``-conf`` (``$BOOKIE_CONF``), for its
metadata service URI, its directories and its bookie id. These commands do the same through
``bookie.bkconf.load_settings``: ``-conf FILE`` (a bookkeeper.conf / bk_server.conf), then
``--config`` (TOML), ``BOOKIE_*`` variables and ``--metadata-service-uri``, with the
precedence ``bookie serve`` has (bkconf.py BC2). ``bookkeeper shell`` (bookie/bk_entry.py)
passes ``$BOOKIE_CONF`` as ``-conf``.

Invariants:
    BS1. A command that needs ZooKeeper and finds no metadata service URI in any layer
         fails naming the three places to give one; it never falls back to a default
         ZooKeeper (BookKeeper's localhost:2181), which could be another cluster's.
    BS2. Failures exit as BookKeeper's shell does (EXIT_BK_FAILURE, -1 -> 255), one line on
         stderr, no traceback; a ZooKeeper that does not answer is a failure after
         ZK_ANSWER_S (api/client/zk_bound.py ZK5), so a caller's ``until ...; do`` loop
         goes round.
    BS3. The bookie id is the one ``bookie serve`` registers with these settings
         (bookie/bkconf_identity.py ``registered_bookie_id``: ``bookie_id``, which the
         chart's useHostNameAsBookieID gives, else ``host:port``), so a command acts on that
         bookie's cookie.
    BS4. A command that needs only ZooKeeper (whatisinstanceid, initnewcluster,
         forceauditchecks, the cookie_* commands, endpointinfo) runs past a key of the
         -conf file that ``bookie serve`` would refuse (exit 78: TLS, directories...),
         saying it once on stderr: the chart's cluster-initialize job must not wait forever
         on a key that concerns the bookie alone.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys

from api.client.metadata import MetadataError
from bookie.bkconf import load_settings
from bookie.bkconf_identity import registered_bookie_id
from bookie.config import BookieConfig, ConfigError, load_config
from bookie.errors import IOFailure
from bookie.properties import parse_properties
from bookie.shell.datadir import UsageError

#: BookKeeper's shell returns -1 for most failures; the process exits with 255.
EXIT_BK_FAILURE = 255
#: ... and 1 where its command returned false (initnewcluster, bookieformat, initbookie).
EXIT_BK_FALSE = 1
#: BookKeeper's bin/bookkeeper, bkenv.sh and Pulsar's chart set these for the JVM and the
#: launcher; they are not settings here, and load_config refuses unknown BOOKIE_* names.
LAUNCHER_VARIABLES = frozenset(
    f"BOOKIE_{name}" for name in (
        "CONF", "LOG_CONF", "ZK_CONF", "EXTRA_OPTS", "EXTRA_CLASSPATH", "PID_DIR",
        "STOP_TIMEOUT", "MEM", "GC", "GC_LOG", "GC_OPTS", "GC_LOGGING_OPTS", "MEM_OPTS",
        "PERF_OPTS", "OPTS", "LOG_DIR", "LOG_FILE", "LOG_APPENDER", "ROOT_LOG_LEVEL",
        "ROOT_LOG_APPENDER", "MAX_HEAP_MEMORY", "MIN_HEAP_MEMORY", "MAX_DIRECT_MEMORY"))


def bk_options() -> argparse.ArgumentParser:
    """The parent parser of every BookKeeper-named command."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument("-conf", "--conf", dest="conf", metavar="FILE",
                         help="BookKeeper's bookkeeper.conf / bk_server.conf, read as "
                         "'bookie serve --conf' reads it (bookkeeper shell: $BOOKIE_CONF)")
    options.add_argument("--config", metavar="FILE",
                         help="TOML settings file (or BOOKIE_CONFIG), above -conf")
    options.add_argument("--metadata-service-uri", metavar="URI",
                         help="the cluster's ZooKeeper, above every file (or "
                         "BOOKIE_METADATA_SERVICE_URI)")
    return options


def settings(args: argparse.Namespace, zookeeper_only: bool = False) -> BookieConfig:
    """The bookie's settings from the layers ``args`` names (BC2 of bookie/bkconf.py).
    BS4: ``zookeeper_only`` (a command that needs no more than the metadata service URI and
    the ZooKeeper credentials) goes on past a refusal elsewhere in the -conf file."""
    environ = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARIABLES}
    flags = {"metadata_service_uri": args.metadata_service_uri}
    try:
        config, _, _ = load_settings(args.conf, getattr(args, "config", None), flags, environ)
    except ConfigError as exc:
        if not (zookeeper_only and args.conf):
            raise UsageError(f"bad configuration: {exc}") from None
        print(f"bookkeeper shell: warning: {exc}; reading only the metadata service URI "
              f"from {args.conf}", file=sys.stderr)
        try:
            config, _ = load_config(getattr(args, "config", None), flags, environ,
                                    underlay=_metadata_only(args.conf))
        except (ConfigError, OSError) as again:
            raise UsageError(f"bad configuration: {again}") from None
    if config.zk_digest or config.zk_digest_file or config.zk_sasl or config.zk_sasl_file:
        from api.client import zk_auth  # noqa: PLC0415 (a secured cluster only)

        try:  # this process's ZooKeeper sessions authenticate as the bookie's do
            zk_auth.use(zk_auth.resolve(config.zk_digest, config.zk_digest_file,
                                        config.zk_sasl, config.zk_sasl_file))
        except zk_auth.CredentialsError as exc:
            raise UsageError(f"bad configuration: {exc}") from None
    return config


def _metadata_only(path: str) -> dict[str, tuple[str, str]]:
    """BS4: metadataServiceUri, else zk://zkServers/zkLedgersRootPath, as bkconf.py maps
    them, and nothing else of the file."""
    with open(path, encoding="latin-1") as handle:
        props = parse_properties(handle.read(), path)
    uri = props["metadataServiceUri"].value if "metadataServiceUri" in props else ""
    servers = props["zkServers"].items if "zkServers" in props else ()
    if not uri and servers:
        root = props["zkLedgersRootPath"].value if "zkLedgersRootPath" in props else ""
        uri = f"zk://{','.join(servers)}{root or '/ledgers'}"
    return {"metadata_service_uri": (uri, path)} if uri else {}


def metadata_uri(config: BookieConfig) -> str:
    """BS1."""
    if not config.metadata_service_uri:
        raise UsageError("no metadata service URI: set metadataServiceUri (or zkServers) in "
                         "the -conf file, BOOKIE_METADATA_SERVICE_URI, or "
                         "--metadata-service-uri")
    return config.metadata_service_uri


def bookie_id(config: BookieConfig) -> str:
    """BS3."""
    return registered_bookie_id(config.bookie_id, config.host, config.port)


def every_dir(config: BookieConfig) -> list[str]:
    """The journal and ledger dirs as configured (each holds ``current/``), journals first."""
    return [os.path.dirname(d) for d in config.journal_dirs_current + config.ledger_dirs_current]


def confirm(prompt: str) -> bool:
    """BookKeeper's IOUtils.confirmPrompt: Y or N, asked again until one is given."""
    while True:
        sys.stdout.write(f"{prompt} (Y or N) ")
        sys.stdout.flush()
        answer = sys.stdin.readline()
        if not answer:
            return False  # end of input: no confirmation
        if answer.strip() in ("Y", "y"):
            return True
        if answer.strip() in ("N", "n"):
            return False


def failure(message: str, code: int = EXIT_BK_FAILURE) -> int:
    print(f"bookkeeper shell: {message}", file=sys.stderr, flush=True)
    return code


def bk_command(handler):
    """BS2: a handler's expected failures as one stderr line and BookKeeper's exit code."""
    @functools.wraps(handler)
    def run(args: argparse.Namespace, out) -> int:
        try:
            return handler(args, out)
        except (UsageError, MetadataError, IOFailure, ValueError) as exc:
            return failure(str(getattr(exc, "message", None) or exc))
        except OSError as exc:
            return failure(f"{exc.filename or ''}: {exc.strerror or exc}")
    return run


def add(commands, name: str, handler, help_text: str,
        description: str) -> argparse.ArgumentParser:
    """One BookKeeper-named command: bk_options, the shell's --json and -v, BS2."""
    output = argparse.ArgumentParser(add_help=False)
    output.add_argument("--json", action="store_true",
                        help="one JSON object per line instead of BookKeeper's lines")
    output.add_argument("-v", "--verbose", action="store_true",
                        help="also log warnings to stderr")
    parser = commands.add_parser(name, parents=[bk_options(), output], help=help_text,
                                 description=description)
    parser.set_defaults(handler=bk_command(handler), bk_command=True)
    return parser
