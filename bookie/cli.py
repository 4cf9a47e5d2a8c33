"""The composition root: ``bookie serve``, ``bookie config show``; ``main()``.

Exit codes: 0 clean stop (SIGTERM drained and checkpointed), 1 refused to start (bad data
dir, missing journal, corrupt record; the message names file and offset; a listener's port
held by another process: the configuration is valid, the machine busy), 2 usage,
78 bad configuration (EX_CONFIG; also a host not this machine's, a privileged port, a TOML
file given to -c/--conf). Each refusal is one line on stderr (bookie/listen_errors.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import logging
import os
import signal
import sys
import time

from bookie import __version__
from bookie.bkconf import add_conf_flag, load_settings, log_summary, render_notes
from bookie.config import EXIT_BAD_CONFIG, BookieConfig, ConfigError
from bookie.config_render import render_config, render_defaults
from bookie.listen_errors import ListenRefused, listen_refusal
from bookie.logs import setup_logging
from bookie.ready_lines import announce as ready_lines, replay_summary
from bookie.sd_notify import Notifier
from bookie.bkconf_identity import registered_bookie_id
from bookie.setting_flags import add_setting_flags

log = logging.getLogger("bookie")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bookie", description="A BookKeeper-compatible bookie: the storage node of a "
        "ledger store. Settings come from --config FILE, then BOOKIE_* variables, then flags.")
    parser.add_argument("--version", action="version", version=f"bookie {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    serve = commands.add_parser("serve", help="replay the journal and serve docs/http-api.md over HTTP",
                                description="Start the bookie on --data-dir and serve HTTP. "
                                "SIGTERM drains in-flight adds, checkpoints and exits 0.")
    serve.add_argument("--config", help="TOML settings file (or BOOKIE_CONFIG)")
    add_conf_flag(serve)
    add_setting_flags(serve)
    recovery = commands.add_parser(
        "autorecovery", help="run autorecovery on its own: the auditor election and a "
        "replication worker (docs/cluster.md §4)",
        description="Join the auditor election and run a replication worker against the "
        "cluster at --metadata-service-uri, until SIGTERM. Cluster bookies run the same "
        "inside (autorecovery_daemon_enabled); run this where bookies do not. Reads the "
        "autorecovery settings (lost_bookie_recovery_delay_s, "
        "open_ledger_rereplication_grace_period_s, rereplication_rate_bytes, "
        "replicas_check_interval_s) like serve.")
    recovery.add_argument("--config", help="TOML settings file (or BOOKIE_CONFIG)")
    add_conf_flag(recovery)
    recovery.add_argument("--without-worker", action="store_true",
                          help="only the auditor election (no replication worker)")
    recovery.add_argument("--id", dest="holder_id", default=None,
                          help="this process's name in votes and locks "
                          "(default HOSTNAME:autorecovery-PID)")
    add_setting_flags(recovery)
    commands.add_parser("shell", add_help=False,
                        help="offline tools on a stopped bookie's files (bookie shell --help)")
    commands.add_parser("ledger", add_help=False,
                        help="write, read, tail and recover ledgers on a running bookie "
                        "(bookie ledger --help)")
    commands.add_parser("cluster", add_help=False,
                        help="a local cluster: ZooKeeper and N bookies (bookie cluster --help)")
    config_cmd = commands.add_parser("config", help="show the effective configuration")
    config_sub = config_cmd.add_subparsers(dest="config_command", metavar="show|defaults")
    config_sub.add_parser("defaults", help="print every setting at its default as a commented "
                          "TOML file (deploy/bookie.toml is this output)")
    show = config_sub.add_parser("show", help="print every setting and where it came from")
    show.add_argument("--config", help="TOML settings file (or BOOKIE_CONFIG)")
    add_conf_flag(show)
    add_setting_flags(show)
    return parser


def _load(args: argparse.Namespace) -> BookieConfig | None:
    try:
        config, _, bk_conf = load_settings(args.conf, args.config, vars(args))
    except ConfigError as exc:
        print(f"bookie: bad configuration: {exc}", file=sys.stderr)
        return None
    if bk_conf is not None:  # bookie/bkconf.py BC1: each key it does not map, listed once
        setup_logging(config)
        log_summary(bk_conf)
    if config.metadata_service_uri and args.command in ("serve", "autorecovery"):
        from api.client import zk_auth  # noqa: PLC0415 (a cluster bookie only)

        zk_auth.use_session_timeout(config.zk_session_timeout_ms / 1000)
        try:  # every ZooKeeper session of this process authenticates with these
            zk_auth.use(zk_auth.resolve(config.zk_digest, config.zk_digest_file,
                                        config.zk_sasl, config.zk_sasl_file))
        except zk_auth.CredentialsError as exc:
            print(f"bookie: bad configuration: {exc}", file=sys.stderr)
            return None
    return config


async def serve(config: BookieConfig, ready_line=sys.stdout, disk=None,
                before_ready=(), before_start=()) -> int:
    """Run until SIGTERM/SIGINT; return the process exit code.

    ``before_ready``: coroutine functions awaited after replay and before READY=1 (a cluster
    bookie registers itself there), so systemd's "started" means "serving and findable".
    ``ready_line``: where the machine ready lines go (RL1 in bookie/ready_lines.py).
    """
    from bookie.node import Bookie

    started = time.monotonic()
    try:
        certificates = _tls_context(config)  # before replay: a bad certificate refuses the start
    except ValueError as exc:  # api.tls.TlsSetupError, naming the file
        print(f"bookie: bad TLS configuration: {exc}", file=sys.stderr, flush=True)
        return EXIT_BAD_CONFIG
    ssl_context = certificates.context
    bookie = Bookie(config, disk=disk)
    notifier = Notifier()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # SIGHUP reloads the certificate; without TLS it must not kill the bookie (its default).
    loop.add_signal_handler(signal.SIGHUP, certificates.reload, "SIGHUP")
    watchdog = asyncio.create_task(_watchdog(notifier), name="sd-watchdog")
    refresh = asyncio.create_task(certificates.watch(config.tls_refresh_interval_s),
                                  name="tls-refresh")  # api/tls_refresh.py TR1-TR4
    member = None
    scheme = "https" if ssl_context is not None else "http"
    try:
        async with contextlib.AsyncExitStack() as listeners:
            try:
                port, bk_port, admin_port, bookie_id = await _open_listeners(
                    listeners, bookie, config, ssl_context)
            except ListenRefused as exc:  # a port in use: one line, not a traceback
                print(f"bookie: {exc}", file=sys.stderr, flush=True)
                notifier.status(str(exc))
                return exc.exit_code
            if config.metadata_service_uri:
                from api.cluster.member import ClusterMember  # noqa: PLC0415 (cluster only)

                member = ClusterMember(bookie, config.metadata_service_uri, config.host, port,
                                       bk_port)
                before_start = (*before_start, member.check_cookie)
                before_ready = (*before_ready, member.start)
            announce = functools.partial(ready_lines, ready_line, config.host, scheme, port,
                                         bk_port, admin_port)
            code = await _run_until_stopped(bookie, stop, notifier, before_ready, bookie_id,
                                            before_start, announce)
            if member is not None:  # before draining: clients stop choosing this bookie
                await (member.stop() if code == 0 else member.close())
        if code == 0:
            await bookie.close()
            log.info("bookie stopped cleanly after %.1fs up: adds drained, checkpointed",
                     time.monotonic() - started)
    finally:
        watchdog.cancel()
        refresh.cancel()
        notifier.close()
    return code


async def _open_listeners(listeners: contextlib.AsyncExitStack, bookie, config: BookieConfig,
                          ssl_context) -> tuple[int, int | None, int | None, str]:
    """The three listeners, in order: (port, bookie_port, admin_port, the id the bookie
    registers and answers as: the HTTP port's unless bookie_id is set). ListenRefused from
    the first that cannot bind."""
    from api.server.app import serving  # noqa: PLC0415 (only serve needs the HTTP stack)
    from api.admin.app import admin_listener  # noqa: PLC0415 (and BookKeeper's admin API)

    port = await _listen(listeners, serving(bookie, config.host, config.port,
                                            ssl_context=ssl_context),
                         "port", config.host, config.port)
    bookie_id = registered_bookie_id(config.bookie_id, config.host, port)
    bk_port = await _listen(listeners, _bk_listener(bookie, config, ssl_context),
                            "bookie_port", config.host, config.bookie_port)
    admin_port = await _listen(listeners, admin_listener(bookie, bookie_id, ssl_context),
                               "admin_port", config.host, config.admin_port)
    return port, bk_port, admin_port, bookie_id


async def _listen(listeners: contextlib.AsyncExitStack, listener, setting: str, host: str,
                  port: int | None):
    """Enter one listener's context on ``listeners``; its bound port (None: it is off).
    A bind that fails raises ListenRefused naming the setting (bookie/listen_errors.py)."""
    try:
        return await listeners.enter_async_context(listener)
    except OSError as exc:
        raise listen_refusal(exc, setting, host, port) from None


@contextlib.asynccontextmanager
async def _bk_listener(bookie, config: BookieConfig, ssl_context=None):
    """BookKeeper's protocol on ``bookie_port`` when it is set (yields its bound port),
    else nothing (yields None). ``ssl_context`` is the HTTPS listener's own object, for
    START_TLS: one reload, SIGHUP's or the refresh poll's, serves both (api/server/bk_tls.py
    TS5)."""
    if config.bookie_port is None:
        yield None
        return
    from api.server.bk_listener import bk_serving  # noqa: PLC0415 (only when it is on)

    async with bk_serving(bookie, config.host, config.bookie_port,
                          ssl_context=ssl_context) as port:
        yield port


def _tls_context(config: BookieConfig):
    """The listener's TLS context (api/tls.py) from the tls_* settings, in the reloader
    of SIGHUP and tls_refresh_interval_s (api/tls_refresh.py); its context is None for
    plain HTTP. Raises TlsSetupError naming the file that does not load."""
    from api.tls_refresh import CertificateReloader  # noqa: PLC0415 (not on the hot path)

    reloader = CertificateReloader(None, config.tls_cert_file, config.tls_key_file,
                                   config.tls_key_password)
    if not config.tls:
        return reloader
    from api.tls import server_context  # noqa: PLC0415 (only a TLS bookie needs it)

    reloader.remember_current()  # TR2: before the load, so no change falls in between
    reloader.context = server_context(config.tls_cert_file, config.tls_key_file,
                                      config.tls_ca_file, config.tls_min_version,
                                      config.tls_key_password)
    return reloader


async def _run_until_stopped(bookie, stop: asyncio.Event, notifier: Notifier,
                             before_ready=(), address: str = "", before_start=(),
                             announce=lambda: None) -> int:
    started = time.monotonic()
    try:
        for hook in before_start:  # checks that must pass before any data is served
            await hook()
    except Exception as exc:  # noqa: BLE001 - a refusal to start, reported and exit 1
        log.error("bookie refused to start: %s", str(exc) or type(exc).__name__)
        notifier.status(f"refused to start: {exc}")
        return 1
    start = asyncio.create_task(bookie.start())
    stopper = asyncio.create_task(stop.wait())
    progress = asyncio.create_task(_report_replay(bookie, notifier), name="sd-progress")
    await asyncio.wait([start, stopper], return_when=asyncio.FIRST_COMPLETED)
    if not start.done():
        log.info("stop requested during replay; finishing replay first")
        await asyncio.wait([start])
    progress.cancel()
    if start.exception() is not None:
        log.error("bookie refused to start: %s", start.exception())
        notifier.status(f"refused to start: {start.exception()}")
        stopper.cancel()
        return 1
    report = bookie.replay_report.to_json() if bookie.replay_report else None
    log.info("bookie ready in %.2fs: %s", time.monotonic() - started, json.dumps(report))
    try:
        for hook in before_ready:  # joining the cluster: registration, autorecovery
            await hook()
    except Exception as exc:  # noqa: BLE001 - ZooKeeper gone mid-join (docs/operations.md §5.6)
        # Stop as a refused start does, but the bookie is running: close it, or its threads
        # keep the process alive after the loop ends.
        log.error("bookie could not join its cluster, stopping: %s", exc)
        notifier.status(f"could not join its cluster: {exc}")
        stopper.cancel()
        await bookie.close()
        return 1
    notifier.send(ready=1, status=f"serving on {address}; {replay_summary(report)}")
    announce()
    await stopper
    log.info("SIGTERM: draining, checkpointing and stopping")
    notifier.send(stopping=1, status="stopping: draining in-flight adds and checkpointing")
    return 0


#: How far each replay STATUS extends systemd's start timeout (EXTEND_TIMEOUT_USEC). Sent only
#: when replay moved since the last line, so a replay that stops moving is not kept alive.
REPLAY_PROGRESS_EXTEND_S = 30
REPLAY_PROGRESS_INTERVAL_S = 0.5


async def _report_replay(bookie, notifier: Notifier) -> None:
    """STATUS lines while replay runs on its worker thread (the loop is free meanwhile)."""
    notifier.status("replaying journals")
    seen = None
    while True:
        report = bookie.replay_report
        if report is not None and (len(report.files), report.bytes) != seen:
            seen = (len(report.files), report.bytes)
            current = os.path.basename(report.files[-1]) if report.files else "-"
            notifier.status(f"replaying journal file {len(report.files)} ({current}): "
                            f"{report.records} records, {report.bytes / 2**20:.1f} MiB",
                            extend_timeout_usec=REPLAY_PROGRESS_EXTEND_S * 1_000_000)
        await asyncio.sleep(REPLAY_PROGRESS_INTERVAL_S)


async def _watchdog(notifier: Notifier) -> None:
    """WATCHDOG=1 from the loop itself at half of WATCHDOG_USEC (SD3 in bookie/sd_notify.py):
    a blocked loop stops the pings and systemd restarts the bookie."""
    if notifier.watchdog_s is None:
        return
    while True:
        notifier.send(watchdog=1)
        await asyncio.sleep(notifier.watchdog_s)


def run_event_loop(main_coroutine, event_loop: str = "uvloop"):
    """Run the daemon's coroutine on uvloop where it is installed (setting ``event_loop``),
    else on asyncio's own loop.

    uvloop cut the server's CPU per single add by 5-19% (docs/operations.md §2.1,
    scripts/bench/bench_http.py --loop); asyncio stays the fallback, and nothing in the bookie
    depends on which runs."""
    if event_loop == "uvloop":
        try:
            import uvloop  # noqa: PLC0415
        except ImportError:
            logging.getLogger("bookie").info("uvloop is not installed: asyncio's loop runs")
        else:
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                return runner.run(main_coroutine)
    return asyncio.run(main_coroutine)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "shell":
        from bookie.shell import main as shell_main  # noqa: PLC0415

        return shell_main(argv[1:])
    if argv and argv[0] == "ledger":
        from api.client.cli import main as ledger_main  # noqa: PLC0415

        return ledger_main(argv[1:])
    if argv and argv[0] == "cluster":
        from api.cluster.cli import main as cluster_main  # noqa: PLC0415

        return cluster_main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "serve":
        config = _load(args)
        if config is None:
            return EXIT_BAD_CONFIG
        setup_logging(config)
        return run_event_loop(serve(config), config.event_loop)
    if args.command == "autorecovery":
        config = _load(args)
        if config is None:
            return EXIT_BAD_CONFIG
        setup_logging(config)
        import socket  # noqa: PLC0415

        from api.cluster.autorecovery.service import run_standalone  # noqa: PLC0415

        holder = args.holder_id or f"{socket.gethostname()}:autorecovery-{os.getpid()}"
        return run_event_loop(run_standalone(config, holder, sys.stdout,
                                             worker=not args.without_worker),
                              config.event_loop)
    if args.command == "config" and args.config_command == "show":
        try:
            config, sources, bk_conf = load_settings(args.conf, args.config, vars(args))
        except ConfigError as exc:
            print(f"bookie: bad configuration: {exc}", file=sys.stderr)
            return EXIT_BAD_CONFIG
        sys.stdout.write(render_config(config, sources))
        if bk_conf is not None:
            sys.stdout.write(render_notes(bk_conf))
        return 0
    if args.command == "config" and args.config_command == "defaults":
        sys.stdout.write(render_defaults())
        return 0
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
