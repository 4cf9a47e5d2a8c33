"""The bookie processes of a local cluster (``bookie cluster up|add|down``, api/cluster/cli.py):
each started detached on its own port and data dir, with its certificate when the cluster
has TLS, and waited for (bounded, with progress lines) until ready or gone."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 120.0
#: ZooKeeper's JVM sometimes outlives SIGTERM by minutes on a loaded machine (seen in the
#: TLS cluster test: the bookies gone at once, ZooKeeper still up 120 s later). It syncs
#: its transaction log before it acknowledges a write, so SIGKILL after this loses nothing.
ZOOKEEPER_STOP_TIMEOUT_S = 15.0


def say(line: str) -> None:
    print(line, flush=True)


def port_free(port: int) -> bool:
    """Whether a bookie could listen on ``port``: bound the way its server binds (asyncio's
    and aiohttp's ``reuse_address``, SO_REUSEADDR on Linux), so that a port an earlier run
    left in TIME-WAIT counts as free (issue 54), while one a process listens on does not."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def make_pki(root: str) -> dict:
    """--tls: the cluster's CA and a client certificate (files under root/pki)."""
    from api.cluster.certs import make_ca, make_cert  # noqa: PLC0415

    pki = os.path.join(root, "pki")
    ca = make_ca(pki, "local bookie cluster CA")
    client = make_cert(ca, pki, "client")
    say(f"made a CA and certificates in {pki} (keys mode 0600)")
    return {"pki": pki, "ca": ca.cert_file, "caKey": ca.key_file,
            "clientCert": client.cert_file, "clientKey": client.key_file}


def client_env(tls: dict) -> dict[str, str]:
    from api.tls import CLIENT_CERT_ENV, CLIENT_KEY_ENV, TRUST_ENV  # noqa: PLC0415

    return {TRUST_ENV: tls["ca"], CLIENT_CERT_ENV: tls["clientCert"],
            CLIENT_KEY_ENV: tls["clientKey"]}


def client_ssl(tls: dict | None):
    if tls is None:
        return None
    from api.tls import client_context  # noqa: PLC0415

    return client_context(tls["ca"], tls["clientCert"], tls["clientKey"])


def rpc_text(bookie: dict) -> str:
    port = bookie.get("rpcPort")
    if port is None:
        return ""
    # A TLS bookie's bookie_port has the same certificate and CA (api/server/bk_tls.py).
    tls = " (START_TLS, mutual TLS)" if bookie.get("url", "").startswith("https") else ""
    return f", bookie-rpc 127.0.0.1:{port}{tls}"


def next_free(port: int, avoid: int | None = None) -> int:
    while port == avoid or not port_free(port):
        port += 1
    return port


def start_bookie(root: str, index: int, port: int, uri: str, tls: dict | None = None,
                  rpc_port: int | None = None, settings: dict | None = None) -> dict:
    """``settings``: more settings for this bookie (its place: api/cluster/topology_cli.py)."""
    home = os.path.join(root, f"bookie-{index}")
    os.makedirs(home, exist_ok=True)
    log = open(os.path.join(home, "bookie.log"), "ab")
    flags = []
    if tls is not None:
        from api.cluster.certs import Issued, make_cert  # noqa: PLC0415

        leaf = make_cert(Issued(tls["ca"], tls["caKey"]), tls["pki"], f"bookie-{index}")
        flags = ["--tls-cert-file", leaf.cert_file, "--tls-key-file", leaf.key_file,
                 "--tls-ca-file", tls["ca"]]
    if rpc_port is not None:
        flags += ["--bookie-port", str(rpc_port)]
    for name, value in (settings or {}).items():
        flags += [f"--{name.replace('_', '-')}", str(value)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "bookie", "serve", "--data-dir", os.path.join(home, "data"),
         "--host", "127.0.0.1", "--port", str(port), "--metadata-service-uri", uri, *flags],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    place = f" at {settings['topology_location']} on {settings['topology_host']}" \
        if settings and "topology_location" in settings else ""
    say(f"starting bookie {index} on port {port}{place} (pid {proc.pid}) ...")
    scheme = "https" if tls is not None else "http"
    return {"id": f"127.0.0.1:{port}", "url": f"{scheme}://127.0.0.1:{port}", "pid": proc.pid,
            "dataDir": os.path.join(home, "data"), "log": os.path.join(home, "bookie.log"),
            "rpcPort": rpc_port, **({"place": settings} if settings else {})}


def wait_ready(bookie: dict, tls: dict | None = None) -> bool:
    """Poll /ready (200 once replayed and registered), bounded; a line every 5 s."""
    deadline, next_line = time.monotonic() + READY_TIMEOUT_S, time.monotonic() + 5
    while time.monotonic() < deadline:
        if not alive(bookie["pid"]):
            say(f"bookie {bookie['id']} exited; see {bookie['log']}")
            return False
        try:
            with urllib.request.urlopen(bookie["url"] + "/ready", timeout=5,
                                        context=client_ssl(tls)) as reply:
                if reply.status == 200:
                    return True
        except OSError:
            pass
        if time.monotonic() >= next_line:
            say(f"  waiting for bookie {bookie['id']} to be ready ...")
            next_line += 5
        time.sleep(0.1)
    say(f"bookie {bookie['id']} not ready after {READY_TIMEOUT_S:.0f} s; see {bookie['log']}")
    return False


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of this process is not alive: reap it if it is ours.
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    except ChildProcessError:
        return True


def wait_gone(pid: int, what: str, timeout_s: float = STOP_TIMEOUT_S,
              quiet: bool = False) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.1)
    if not quiet:
        say(f"{what} (pid {pid}) still running after {timeout_s:.0f} s")
    return False


def stop_zookeeper(pid: int) -> bool:
    """SIGTERM, then SIGKILL once ZOOKEEPER_STOP_TIMEOUT_S passes (said, not an error)."""
    os.kill(pid, signal.SIGTERM)
    if wait_gone(pid, "ZooKeeper", ZOOKEEPER_STOP_TIMEOUT_S, quiet=True):
        return True
    say(f"ZooKeeper (pid {pid}) still running {ZOOKEEPER_STOP_TIMEOUT_S:.0f} s after "
        f"SIGTERM: SIGKILL (its transaction log is synced; nothing is lost)")
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    return wait_gone(pid, "ZooKeeper", ZOOKEEPER_STOP_TIMEOUT_S)
