"""Small real file systems made by a test, as root: a size-limited tmpfs, or an ext4 image on a
loop device whose sparse backing file lives on a tmpfs smaller than the image (so once the
tmpfs is full, the loop device fails writes and ext4 returns EIO from fsync: a real I/O error
on the real path, without device-mapper, which this kernel may lack).

``unavailable()`` names why mounting is impossible here (not root, no tool, the kernel
refuses); tests skip with that reason, visibly, and a skip never counts as a pass.

Every mount is undone however the test ends, and every loop device detached. A file system
still busy at that point means this process leaked a handle into it: the test fails naming
the open files (``BusyFileSystem``), and the file system is detached lazily so that nothing
stays mounted (the kernel frees it when the last handle closes, at the latest when the
process exits). After a test failure the detach is quiet, so the first error stays the one
reported. A lazy unmount is never taken as done: e2fsck on a file system still alive behind
one would race its writeback.
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


class BusyFileSystem(RuntimeError):
    """umount found the file system busy; it was detached lazily instead."""


def open_files_under(path: str) -> list[str]:
    """Files this process holds open under ``path`` (from /proc/self/fd)."""
    prefix = os.path.join(os.path.realpath(path), "")
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # the listing's own descriptor, closed by now
        if target.startswith(prefix):
            found.append(target)
    return sorted(found)


def _umount(path: str) -> None:
    """Unmount, or detach lazily and raise BusyFileSystem naming what holds it."""
    done = _run("umount", path)
    if done.returncode == 0:
        return
    held = open_files_under(path)
    _run("umount", "-l", path)
    raise BusyFileSystem(f"umount {path}: {done.stderr.strip()}; open in this process: "
                         f"{held or 'nothing (held by a loop device or another process)'}")


@contextlib.contextmanager
def _afterwards(cleanup):
    """Run ``cleanup`` however the block ends; after a failed block its own error is
    suppressed, so the block's error is the one reported."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(Exception):
            cleanup()
        raise
    cleanup()


@contextlib.contextmanager
def tmpfs(path: str, size_bytes: int):
    os.makedirs(path, exist_ok=True)
    done = _run("mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", path)
    if done.returncode != 0:
        raise RuntimeError(f"mount tmpfs at {path}: {done.stderr.strip()}")
    with _afterwards(lambda: _umount(path)):
        yield path


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
        """Unmount (BusyFileSystem if a handle leaked) and detach the loop device either way:
        detaching a device still in use marks it to go once its last user does."""
        try:
            if os.path.ismount(self.mountpoint):
                _umount(self.mountpoint)
        finally:
            self.detach()

    def detach(self) -> None:
        if self.device is not None:
            done = _run("losetup", "-d", self.device)
            device, self.device = self.device, None
            if done.returncode != 0:
                raise RuntimeError(f"losetup -d {device}: {done.stderr.strip()}")

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
        with _afterwards(fs.unmount):
            yield fs
