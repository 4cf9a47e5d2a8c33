"""A test network of our own: a bridge on the host and one network namespace per bookie.

Lets a drill cut a bookie off for real (its link goes down: packets vanish, nothing is
refused, as in a network partition) and heal it, with no address outside what it made:

    bridge  <tag>br   10.214.S.1/24   (ZooKeeper listens here; the drill's clients route here)
    netns   <tag>n<i>, veth <tag>h<i> (on the bridge) <-> <tag>p<i> (in the netns)
            10.214.S.(i+2)/24          (bookie i listens here)

Needs root and iproute2; ``unavailable()`` says why not. ``close()`` removes all of it.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess


def _ip(*argv: str) -> None:
    done = subprocess.run(["ip", *argv], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(argv)}: {done.stderr.strip()}")


def unavailable() -> str | None:
    if os.geteuid() != 0:
        return "needs root (ip netns)"
    if shutil.which("ip") is None:
        return "needs iproute2 (ip)"
    return None


class TestNetwork:
    def __init__(self, hosts: int) -> None:
        self.tag = f"bk{random.randrange(16**4):04x}"
        self.subnet = random.randrange(10, 250)
        self.hosts = hosts
        self.bridge = f"{self.tag}br"
        self.made: list[str] = []

    @property
    def host_address(self) -> str:
        return f"10.214.{self.subnet}.1"

    def address(self, index: int) -> str:
        return f"10.214.{self.subnet}.{index + 2}"

    def namespace(self, index: int) -> str:
        return f"{self.tag}n{index}"

    def _inner(self, index: int) -> str:
        return f"{self.tag}p{index}"

    def prefix(self, index: int) -> tuple[str, ...]:
        return ("ip", "netns", "exec", self.namespace(index))

    def create(self) -> "TestNetwork":
        _ip("link", "add", self.bridge, "type", "bridge")
        self.made.append(("link", self.bridge))
        _ip("addr", "add", f"{self.host_address}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for i in range(self.hosts):
            ns, outer, inner = self.namespace(i), f"{self.tag}h{i}", self._inner(i)
            _ip("netns", "add", ns)
            self.made.append(("netns", ns))
            _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
            _ip("link", "set", outer, "master", self.bridge)
            _ip("link", "set", outer, "up")
            _ip("link", "set", inner, "netns", ns)
            _ip("netns", "exec", ns, "ip", "addr", "add", f"{self.address(i)}/24", "dev", inner)
            _ip("netns", "exec", ns, "ip", "link", "set", inner, "up")
            _ip("netns", "exec", ns, "ip", "link", "set", "lo", "up")
        return self

    def cut(self, index: int) -> None:
        """The bookie's link goes down: its packets vanish both ways (a real partition)."""
        _ip("netns", "exec", self.namespace(index), "ip", "link", "set", self._inner(index),
            "down")

    def heal(self, index: int) -> None:
        _ip("netns", "exec", self.namespace(index), "ip", "link", "set", self._inner(index),
            "up")

    def close(self) -> None:
        """Remove what was made (deleting a netns deletes its end of the veth, and the pair)."""
        for kind, name in reversed(self.made):
            try:
                _ip(*(("netns", "del", name) if kind == "netns" else ("link", "del", name)))
            except RuntimeError:
                pass
        self.made.clear()
