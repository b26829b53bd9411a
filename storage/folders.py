"""Whose folder is it (sessiontree's own repositories versus folders of others, pi's), and where caches live.

sessiontree writes into a folder only if it is its own. A folder is **ours** when it holds
the marker file :data:`MARKER`, which the JSONL store writes when it creates the folder, or
when it stores a session into an existing folder that holds nothing of anyone else's (no pi
session file, no sessions in sub-folders: a repository made before markers existed is
adopted that way). Every other folder is **foreign**: listing it keeps its index in the
user's cache directory, and the command line puts new sessions elsewhere.

A cache is never a source: what it holds is checked against the log it stands for, and a missing, damaged or
unwritable one only costs time. Its folder is the user's cache folder as ``platformdirs`` finds it
(``$XDG_CACHE_HOME/sessiontree`` or ``~/.cache/sessiontree`` on Linux); a cache of a file or folder that is not ours
is named by a SHA-256 of that path's real path (:func:`cache_file`), and every cache is written by :func:`write_private`:
private, atomic, and nothing left behind when it fails.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from pathlib import Path

import platformdirs

from sessiontree.storage.files import make_private_dirs, open_regular, write_atomic
from sessiontree.wire.jsontext import DECODE_ERRORS, loads
from sessiontree.wire.schema import is_pi_header

MARKER = ".sessiontree-repository"
MARKER_TEXT = b"This folder is a sessiontree repository: sessiontree created it, or adopted it holding only its own sessions.\n"
HEADER_LIMIT = 1 << 20  # a header line longer than this is not read to tell the dialect
APP = "sessiontree"
_SESSION_HEADER = re.compile(rb'\s*\{\s*"type"\s*:\s*"session"')


def is_ours(root: str | os.PathLike[str]) -> bool:
    """Does ``root`` carry sessiontree's marker (a regular file, never a link)?"""
    try:
        return stat.S_ISREG(os.lstat(os.path.join(root, MARKER)).st_mode)
    except OSError:
        return False


def claim(root: str | os.PathLike[str]) -> None:
    """Mark ``root`` as sessiontree's own (a folder it just created, or adopted)."""
    try:
        fd = os.open(os.path.join(root, MARKER), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:  # there already (another process was first), or a read-only folder: nothing to mark
        return
    with open(fd, "wb") as handle:
        handle.write(MARKER_TEXT)


def foreign_reason(root: str | os.PathLike[str]) -> str | None:
    """Why the existing folder ``root`` is not sessiontree's to write into, or None if it is.

    Ours: it carries the marker, or it holds no pi session file and no session files in
    sub-folders (pi's layout, one sub-folder per working directory).
    """
    if is_ours(root):
        return None
    try:
        entries = list(os.scandir(root))
    except OSError:
        return None  # not a readable folder: whoever creates it will make it ours
    for entry in entries:
        if entry.name.startswith("."):
            continue
        if entry.is_dir(follow_symlinks=False) and _holds_logs(entry.path):
            return f"holds sessions in sub-folders ({entry.name}/: pi's layout, one folder per working directory)"
        if entry.name.endswith(".jsonl") and entry.is_file(follow_symlinks=False) and _is_pi_log(entry.path):
            return f"holds pi's session files ({entry.name})"
    return None


def _holds_logs(folder: str) -> bool:
    try:
        return any(e.name.endswith(".jsonl") and not e.name.startswith(".") for e in os.scandir(folder))
    except OSError:
        return False


def _is_pi_log(path: str) -> bool:
    """Is the first line a pi session header (a ``session`` header without the native writer's ``parent_session``)? A
    session header too long to read whole (a huge cwd) counts as pi's: when in doubt, the folder is not ours."""
    try:
        fd = open_regular(path, follow=False)
        try:
            head = os.pread(fd, HEADER_LIMIT, 0)
        finally:
            os.close(fd)
    except OSError:
        return False
    first, newline, _ = head.partition(b"\n")
    if not newline and len(head) == HEADER_LIMIT:
        return _SESSION_HEADER.match(first) is not None
    try:
        header = loads(first)
    except DECODE_ERRORS:
        return False
    return isinstance(header, dict) and is_pi_header(header)


def cached_index_path(root: str | os.PathLike[str]) -> str | None:
    """Where the listing index of the foreign folder ``root`` is kept: one file per folder, named by a
    hash of its real path, in ``<cache>/sessiontree/indexes/``; None when there is no cache directory."""
    return cache_file("indexes", root, ".json", 32)


def cache_folder() -> str | None:
    """The user's cache folder for sessiontree; None when there is no usable one (a relative ``$XDG_CACHE_HOME``, no
    home): callers then keep nothing."""
    folder = platformdirs.user_cache_dir(APP, appauthor=False)
    if not os.path.isabs(folder):
        return None
    if not os.path.isabs(os.environ.get("XDG_CACHE_HOME", "")) and not os.path.isdir(os.path.expanduser("~")):
        return None  # never make a home that is not there
    return folder


def cache_file(kind: str, path: str | os.PathLike[str], suffix: str, digits: int = 40) -> str | None:
    """Where the cache ``kind`` of ``path`` is kept: ``<cache folder>/<kind>/<SHA-256 of its real path><suffix>`` (the
    first ``digits`` hex digits); None without a cache folder."""
    folder = cache_folder()
    if folder is None:
        return None
    key = hashlib.sha256(os.fsencode(os.path.realpath(path))).hexdigest()[:digits]
    return os.path.join(folder, kind, f"{key}{suffix}")


def private_parent(path: str) -> bool:
    """Create the folders above ``path`` (0700); False if that is not possible."""
    try:
        make_private_dirs(Path(path).parent)
    except OSError:
        return False
    return True


def write_private(path: str, data: bytes) -> bool:
    """Write ``data`` to ``path`` atomically (a new private file renamed over it; a link or file planted at the temporary
    name is refused), making its folders private; False, and nothing left behind, if it cannot be written."""
    if not private_parent(path):
        return False
    try:
        write_atomic(path, data)  # a cache: not synced (a crash loses it, and it is rebuilt)
    except OSError:
        return False
    return True
