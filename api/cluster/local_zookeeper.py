"""A local ZooKeeper server from Debian's ``zookeeper`` package, started and stopped by PID.

Used by ``bookie cluster up`` (api/cluster/cli.py) and by the tests (tests/cluster/conftest.py).
``ZooKeeperServer(root).start()`` writes its own ``zoo.cfg`` (127.0.0.1, a free port or the
one given, ``root/data``), runs ``org.apache.zookeeper.server.ZooKeeperServerMain`` from the
package's jars, waits (bounded, polling ``ruok``) until it answers ``imok``; ``stop()`` ends
that PID. A machine without the package gets an error saying how to install it.

``sasl_users={"name": "password"}`` starts it SASL-enabled (docs/operations.md §7.1): a JAAS
file in ``root`` with a ``Server`` section of ZooKeeper's ``DigestLoginModule`` listing those
users, passed as ``-Djava.security.auth.login.config``, and ``authProvider.1`` set to
``SASLAuthenticationProvider`` in zoo.cfg, so a DIGEST-MD5 login (ours, zk_sasl, and Apache
BookKeeper's ``zkEnableSecurity`` tools') becomes the session's ``sasl:<user>`` identity.
Unauthenticated sessions are still let in (ZooKeeper's default): the ACLs keep them out.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time

JARS = ("/usr/share/java/zookeeper.jar", "/usr/share/java/zookeeper-jute.jar")
MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
SASL_PROVIDER = "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"
DIGEST_LOGIN = "org.apache.zookeeper.server.auth.DigestLoginModule"
INSTALL_HINT = ("ZooKeeper is not installed: tests that need it run a real server from "
                "Debian's package (`apt-get install zookeeper`; .ci/run installs it)")


def missing() -> str | None:
    """Why no ZooKeeper server can be started here, or None."""
    if shutil.which("java") is None:
        return "java is not installed (apt-get install openjdk-17-jre-headless)"
    absent = [jar for jar in JARS if not os.path.exists(jar)]
    return f"{INSTALL_HINT}; missing {', '.join(absent)}" if absent else None


def jaas_quote(text: str) -> str:
    """A JAAS option value: double-quoted, its backslashes and quotes escaped (JAAS's parser
    is Java's StreamTokenizer, which reads those escapes)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def jaas_server_section(users: dict[str, str]) -> str:
    """The JAAS ``Server`` section of a ZooKeeper whose DIGEST-MD5 logins are these users."""
    lines = "".join(f"\n  user_{name}={jaas_quote(password)}" for name, password in users.items())
    return f"Server {{\n  {DIGEST_LOGIN} required{lines};\n}};\n"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def four_letter(port: int, word: bytes, timeout_s: float = 2.0,
                host: str = "127.0.0.1") -> bytes:
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.sendall(word)
        chunks = []
        while True:
            chunk = sock.recv(4096)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)


class ZooKeeperServer:
    def __init__(self, root: str, port: int = 0, detached: bool = False,
                 host: str = "127.0.0.1", sasl_users: dict[str, str] | None = None) -> None:
        self.root = root
        self.sasl_users = sasl_users  # None: no SASL logins (digest and open sessions only)
        self.port = port
        self.host = host  # another address only for test networks a drill made (ip netns)
        self.detached = detached  # outlives this process (bookie cluster up)
        self.proc: subprocess.Popen | None = None

    @property
    def hosts(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout_s: float = 60.0) -> "ZooKeeperServer":
        reason = missing()
        if reason is not None:
            raise RuntimeError(reason)
        os.makedirs(os.path.join(self.root, "data"), exist_ok=True)
        self.port = self.port or free_port()
        config = os.path.join(self.root, "zoo.cfg")
        with open(config, "w") as handle:
            handle.write(
                f"tickTime=200\ndataDir={self.root}/data\nclientPort={self.port}\n"
                f"clientPortAddress={self.host}\nadmin.enableServer=false\n"
                "minSessionTimeout=400\nmaxSessionTimeout=60000\n"
                "4lw.commands.whitelist=ruok,srvr\n"
                + (f"authProvider.1={SASL_PROVIDER}\n" if self.sasl_users else ""))
        java = ["java", "-Xmx256m", "-cp", ":".join(JARS), f"-Dzookeeper.log.dir={self.root}"]
        if self.sasl_users:
            jaas = os.path.join(self.root, "zookeeper-jaas.conf")
            with open(os.open(jaas, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as out:
                out.write(jaas_server_section(self.sasl_users))  # passwords: owner-only file
            java.append(f"-Djava.security.auth.login.config={jaas}")
        log = open(os.path.join(self.root, "zookeeper.log"), "ab")
        self.proc = subprocess.Popen(java + [MAIN, config], stdout=log,
                                     stderr=subprocess.STDOUT, start_new_session=self.detached)
        self._wait_ok(timeout_s)
        return self

    def _wait_ok(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited {self.proc.returncode}; "
                                   f"log {self.root}/zookeeper.log")
            try:
                if four_letter(self.port, b"ruok", host=self.host) == b"imok":
                    return
            except OSError:
                pass  # not listening yet
            time.sleep(0.05)  # bounded readiness poll of a child process
        self.stop()
        raise TimeoutError(f"ZooKeeper not answering after {timeout_s}s on {self.hosts}")

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)
        self.proc = None
