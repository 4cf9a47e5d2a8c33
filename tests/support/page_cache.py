"""Which pages of a file the page cache holds: mincore(2), for tests of drop_cache hints."""

from __future__ import annotations

import ctypes
import mmap
import os


def resident_pages(path: str) -> list[bool]:
    """Which pages of ``path`` the page cache holds: mincore(2) over a read-only mapping
    (mapping does not read the file; only touching it would)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    size = os.path.getsize(path)
    pages = -(-size // mmap.PAGESIZE)
    fd = os.open(path, os.O_RDONLY)
    try:
        address = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        assert address not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
        try:
            vector = ctypes.create_string_buffer(pages)
            assert libc.mincore(address, size, vector) == 0, ctypes.get_errno()
            return [byte & 1 == 1 for byte in vector.raw[:pages]]
        finally:
            libc.munmap(address, size)
    finally:
        os.close(fd)

