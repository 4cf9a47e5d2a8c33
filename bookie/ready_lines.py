"""What ``bookie serve`` says once it serves (RL1): the machine ready lines on stdout that
tests/support/servers.py and scripts/ read (docs/operations.md §1), the same news in the log,
and the replay's one-line summary systemd's STATUS= carries."""

from __future__ import annotations

import logging

log = logging.getLogger("bookie")


def announce(ready_line, host: str, scheme: str, port: int, bk_port: int | None,
              admin_port: int | None) -> None:
    """RL1: once the bookie serves (replayed, its cookie checked, registered in its cluster,
    READY=1 sent), and never for a start it refused: the machine ready lines on
    ``ready_line`` (stdout; tests/support/servers.py and scripts/ read them, docs/
    operations.md §1) and the same news for people through the logger."""
    lines = [f"bookie listening on {scheme}://{host}:{port}"]
    if bk_port is not None:
        lines.append(f"bookie-rpc listening on {host}:{bk_port}")
    if admin_port is not None:  # BookKeeper's admin REST API (docs/admin-api.md)
        lines.append(f"bookie-admin listening on {scheme}://{host}:{admin_port}")
    print("\n".join(lines), file=ready_line, flush=True)
    log.info("bookie serving: HTTP on %s://%s:%d%s%s", scheme, host, port,
             f", BookKeeper protocol on {host}:{bk_port}" if bk_port is not None else "",
             f", admin API on {scheme}://{host}:{admin_port}" if admin_port is not None
             else "")


def replay_summary(report: dict | None) -> str:
    if not report:
        return "nothing replayed"
    return (f"replayed {len(report['files'])} journal file(s), {report['records']} records, "
            f"{report['bytes'] / 2**20:.1f} MiB")
