"""Cache files: where they live, how one is named for the path it caches, and how it is written.

A cache is never a source: what it holds is checked against the log it stands for, and a missing, damaged or
unwritable one only costs time. Its folder is the user's cache folder as ``platformdirs`` finds it
(``$XDG_CACHE_HOME/sessiontree`` or ``~/.cache/sessiontree`` on Linux); a cache of a file or folder that is not ours
is named by a SHA-256 of that path's real path (:func:`cache_file`), and every cache is written by :func:`write_private`:
private, atomic, and nothing left behind when it fails.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import platformdirs

from sessiontree.storage.files import make_private_dirs, write_atomic

APP = "sessiontree"


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
