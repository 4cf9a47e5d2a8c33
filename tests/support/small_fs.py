"""Small real file systems made by a test, as root: a size-limited tmpfs, or an ext4 image on a
loop device whose sparse backing file lives on a tmpfs smaller than the image (so once the
tmpfs is full, the loop device fails writes and ext4 returns EIO from fsync: a real I/O error
on the real path, without device-mapper, which this kernel may lack).

``unavailable()`` names why mounting is impossible here (not root, no tool, the kernel
refuses); tests skip with that reason, visibly, and a skip never counts as a pass. Every
mount is undone in a ``finally``, lazily if the file system is still busy.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile

TOOLS = ("mount", "umount")
LOOP_TOOLS = ("losetup", "mkfs.ext4", "e2fsck")


def _run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def unavailable(loop: bool = False) -> str | None:
    """Why a test cannot mount here, or None if it can (probed with a 1 MiB tmpfs)."""
    if os.geteuid() != 0:
        return "mounting a file system needs root (euid is not 0)"
    missing = [t for t in TOOLS + (LOOP_TOOLS if loop else ()) if shutil.which(t) is None]
    if missing:
        return f"missing tools: {', '.join(missing)}"
    probe = tempfile.mkdtemp(prefix="mount-probe-")
    try:
        done = _run("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", probe)
        if done.returncode != 0:
            return f"mount -t tmpfs failed: {done.stderr.strip()}"
        _umount(probe)
        if loop and not os.path.exists("/dev/loop-control"):
            return "no /dev/loop-control: loop devices are unavailable"
        return None
    finally:
        os.rmdir(probe)


def _umount(path: str) -> None:
    if _run("umount", path).returncode != 0:
        _run("umount", "-l", path)  # still busy: detach now, free when the last user goes


@contextlib.contextmanager
def tmpfs(path: str, size_bytes: int):
    os.makedirs(path, exist_ok=True)
    done = _run("mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", path)
    if done.returncode != 0:
        raise RuntimeError(f"mount tmpfs at {path}: {done.stderr.strip()}")
    try:
        yield path
    finally:
        _umount(path)


def resize_tmpfs(path: str, size_bytes: int) -> None:
    done = _run("mount", "-o", f"remount,size={size_bytes}", path)
    if done.returncode != 0:
        raise RuntimeError(f"remount {path}: {done.stderr.strip()}")


class LoopExt4:
    """ext4 on a loop device over a sparse image on a tmpfs smaller than the image."""

    def __init__(self, base: str, backing_bytes: int, image_bytes: int) -> None:
        self.backing = os.path.join(base, "backing")
        self.mountpoint = os.path.join(base, "ext4")
        self.image = os.path.join(self.backing, "image.ext4")
        self.backing_bytes = backing_bytes
        self.image_bytes = image_bytes
        self.device: str | None = None

    def make(self) -> None:
        with open(self.image, "wb") as handle:
            handle.truncate(self.image_bytes)
        done = _run("mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0",
                    self.image)
        if done.returncode != 0:
            raise RuntimeError(f"mkfs.ext4: {done.stderr.strip()}")

    def mount(self) -> None:
        done = _run("losetup", "-f", "--show", self.image)
        if done.returncode != 0:
            raise RuntimeError(f"losetup: {done.stderr.strip()}")
        self.device = done.stdout.strip()
        os.makedirs(self.mountpoint, exist_ok=True)
        done = _run("mount", self.device, self.mountpoint)
        if done.returncode != 0:
            self.detach()
            raise RuntimeError(f"mount {self.device}: {done.stderr.strip()}")

    def unmount(self) -> None:
        if os.path.ismount(self.mountpoint):
            _umount(self.mountpoint)
        self.detach()

    def detach(self) -> None:
        if self.device is not None:
            _run("losetup", "-d", self.device)
            self.device = None

    def fsck(self) -> int:
        """Repair after the aborted journal; 0..2 mean clean or corrected."""
        return _run("e2fsck", "-f", "-y", self.image).returncode


@contextlib.contextmanager
def loop_ext4_on_small_backing(base: str, backing_bytes: int, image_bytes: int):
    os.makedirs(base, exist_ok=True)
    with tmpfs(os.path.join(base, "backing"), backing_bytes):
        fs = LoopExt4(base, backing_bytes, image_bytes)
        fs.make()
        fs.mount()
        try:
            yield fs
        finally:
            fs.unmount()
