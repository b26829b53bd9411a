"""Which session files changed since the last search, told by the kernel (Linux inotify) instead of a ``stat`` of
every file.

A search catches its index up first; with thousands of files the ``stat`` of each one is most of a warm search's
time. A :class:`FolderWatch` asks Linux to report every write, creation, deletion and rename in the folder and its
sub-folders, by any process, and hands back the names that changed; only those are looked at. Whenever it cannot be
sure (the kernel's queue overflowed, a sub-folder came or went, a watch could not be added, not Linux) it says so
and the caller scans every file, as without it. It is a hint for speed, never the truth: what a file holds is always
read from the file.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
import sys
import threading
import weakref
from typing import Any

_IN_MODIFY, _IN_ATTRIB, _IN_CLOSE_WRITE = 0x2, 0x4, 0x8
_IN_MOVED_FROM, _IN_MOVED_TO, _IN_CREATE, _IN_DELETE = 0x40, 0x80, 0x100, 0x200
_IN_DELETE_SELF, _IN_MOVE_SELF, _IN_Q_OVERFLOW, _IN_IGNORED, _IN_ISDIR = 0x400, 0x800, 0x4000, 0x8000, 0x40000000
_IN_NONBLOCK, _IN_CLOEXEC = os.O_NONBLOCK, os.O_CLOEXEC
_MASK = (_IN_MODIFY | _IN_ATTRIB | _IN_CLOSE_WRITE | _IN_MOVED_FROM | _IN_MOVED_TO | _IN_CREATE | _IN_DELETE
         | _IN_DELETE_SELF | _IN_MOVE_SELF)
_RESCAN = _IN_Q_OVERFLOW | _IN_IGNORED | _IN_DELETE_SELF | _IN_MOVE_SELF
_HEADER = struct.Struct("iIII")


def _libc() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc if hasattr(libc, "inotify_init1") else None
    except OSError:
        return None


_LIBC = _libc()


class FolderWatch:
    """The changes in one folder and its sub-folders since the last :meth:`changes` (see the module doc)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._dirs: dict[int, str] = {}  # watch descriptor -> prefix ("" for the root, "sub/" for a sub-folder)
        self._fd = -1
        self._lock = threading.Lock()
        self._closer: Any = None
        if _LIBC is not None:
            fd = _LIBC.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
            if fd >= 0:
                self._fd = fd
                self._closer = weakref.finalize(self, os.close, fd)  # once: by close() or when collected
        self._broken = self._fd < 0 or not self.watch("")

    @property
    def usable(self) -> bool:
        return not self._broken

    def watch(self, prefix: str) -> bool:
        """Watch the folder ``prefix`` names ("" the root, "sub/" a sub-folder); False if the kernel refused."""
        if self._fd < 0:
            return False
        path = os.fsencode(os.path.join(self.root, prefix))
        wd = _LIBC.inotify_add_watch(self._fd, path, _MASK)
        if wd < 0:
            self._broken = True
            return False
        self._dirs[wd] = prefix
        return True

    def changes(self) -> set[str] | None:
        """The names (relative to the root) written, made, deleted or renamed since the last call; None: anything may
        have changed, scan everything (and :meth:`rearm` after)."""
        with self._lock:
            names: set[str] = set()
            rescan = self._broken
            while self._fd >= 0:
                try:
                    data = os.read(self._fd, 1 << 16)
                except BlockingIOError:
                    break
                except OSError as exc:
                    if exc.errno == errno.EINTR:
                        continue
                    rescan = True
                    break
                rescan |= self._parse(data, names)
            return None if rescan else names

    def _parse(self, data: bytes, names: set[str]) -> bool:
        rescan, pos = False, 0
        while pos < len(data):
            wd, mask, _cookie, length = _HEADER.unpack_from(data, pos)
            name = data[pos + _HEADER.size : pos + _HEADER.size + length].rstrip(b"\0")
            pos += _HEADER.size + length
            if mask & _RESCAN or (mask & _IN_ISDIR and mask & (_IN_CREATE | _IN_DELETE | _IN_MOVED_FROM | _IN_MOVED_TO)):
                rescan = True  # a folder came or went, or the queue overflowed: the set of files is not known
                continue
            prefix = self._dirs.get(wd)
            if prefix is None:
                rescan = True
                continue
            names.add(prefix + os.fsdecode(name))
        return rescan

    def rearm(self, prefixes: set[str]) -> None:
        """After a full scan: watch the sub-folders it found (the root is watched already)."""
        with self._lock:
            self._broken = self._fd < 0
            known = set(self._dirs.values())
            for prefix in sorted({"", *prefixes} - known):
                if not self.watch(prefix):
                    break

    def close(self) -> None:
        if self._closer is not None:
            self._closer()
        self._fd = -1
