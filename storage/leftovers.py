"""Files a crash leaves behind that can hold a log's content: the whole-file copy an erasure writes before renaming
it over the session (``.<file>.<pid>.rewrite``), a blob being written (``.blobs/sha256/xx/.<digest>.<pid>.<n>.tmp``) and
the listing index being saved (``.sessiontree-index.json.<pid>.<thread>.tmp``). Each name carries the writer's pid.

They are removed by whoever holds the lock their writer held (an erasure holds the session file's lock; a
collection holds the blob folder's exclusive lock, which every blob write shares), and only when their writer is no
longer running: a live writer's file is never touched. A blob write also removes those of its own ``sha256/xx``
folder whose writer is gone and that are over a minute old. ``verify`` reports them (docs/audit.md).
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

REWRITE_SUFFIX = ".rewrite"
TEMP_SUFFIX = ".tmp"


def _digits(part: str) -> int | None:
    return int(part) if part.isdigit() else None


def _rewrite_pid(name: str) -> int | None:  # .<file>.<pid>.rewrite
    return _digits(name.split(".")[-2])


def _blob_pid(name: str) -> int | None:  # .<8 hex>.<pid>.<8 hex>.tmp
    parts = name.split(".")
    return _digits(parts[2]) if len(parts) == 5 else None


def _index_pid(name: str) -> int | None:  # <index file>.<pid>.<thread>.tmp
    parts = name.split(".")
    return _digits(parts[-3]) if len(parts) >= 4 else None


def running(pid: int | None) -> bool:
    """Is a process with this pid running (as far as this process can see)? None (no pid): taken as running."""
    if pid is None:
        return True
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's process
    return True


Leftover = tuple[Path, int | None]  # the file, and the pid of the process that wrote it


def _regular(paths: Iterable[Path], pid: Callable[[str], int | None]) -> Iterator[Leftover]:
    for path in paths:
        try:
            if stat.S_ISREG(os.lstat(path).st_mode):
                yield path, pid(path.name)
        except OSError:
            continue


def rewrites(session_file: Path) -> list[Leftover]:
    """The erasure copies of ``session_file`` beside it (any writer's)."""
    prefix = f".{session_file.name}."
    try:
        names = [e.name for e in os.scandir(session_file.parent) if e.name.startswith(prefix)]
    except OSError:
        return []
    return sorted(_regular((session_file.parent / n for n in names if n.endswith(REWRITE_SUFFIX)), _rewrite_pid))


def _real_folders(*folders: Path) -> bool:
    """Is each of ``folders`` a folder, not a link to one (a sweep never follows a link out of the repository)?"""
    try:
        return all(stat.S_ISDIR(os.lstat(folder).st_mode) for folder in folders)
    except OSError:
        return False


def blob_temps(folder: Path) -> list[Leftover]:
    """The temporary files of blob writes under a blob folder (``<folder>/sha256/xx/.*.tmp``)."""
    found: list[Leftover] = []
    if not _real_folders(folder, folder / "sha256"):
        return found
    try:
        parts = [e for e in os.scandir(folder / "sha256") if len(e.name) == 2 and e.is_dir(follow_symlinks=False)]
    except OSError:
        return found
    for part in parts:
        found.extend(blob_temps_in(Path(part.path)))
    return sorted(found)


def blob_temps_in(part: Path) -> list[Leftover]:
    """The temporary files of blob writes in one ``sha256/xx`` folder."""
    if not _real_folders(part.parent.parent, part.parent, part):
        return []
    try:
        names = [e.name for e in os.scandir(part) if e.name.startswith(".") and e.name.endswith(TEMP_SUFFIX)]
    except OSError:
        return []
    return sorted(_regular((part / n for n in names), _blob_pid))


def stale(found: Iterable[Leftover], age: float) -> list[Path]:
    """The leftovers whose writer is not running and that nothing changed for ``age`` seconds (the check a writer
    makes, holding only a shared lock: a process it cannot see, in another pid namespace, may still be writing one)."""
    now = time.time()
    old = []
    for path in dead(found):
        try:
            if now - os.lstat(path).st_mtime > age:
                old.append(path)
        except OSError:
            continue
    return old


def index_temps(index_file: str) -> list[Leftover]:
    """The temporary files of a listing index being saved (``<index>.<pid>.<thread>.tmp``)."""
    path = Path(index_file)
    prefix = path.name + "."
    try:
        names = [e.name for e in os.scandir(path.parent) if e.name.startswith(prefix) and e.name.endswith(TEMP_SUFFIX)]
    except OSError:
        return []
    return sorted(_regular((path.parent / n for n in names), _index_pid))


def dead(found: Iterable[Leftover]) -> list[Path]:
    """The leftovers whose writer is not running."""
    return [path for path, pid in found if not running(pid)]


def remove(paths: Iterable[Path]) -> list[Path]:
    """Unlink ``paths`` (one already gone is fine); the ones removed."""
    gone = []
    for path in paths:
        try:
            os.unlink(path)
            gone.append(path)
        except FileNotFoundError:
            continue
        except OSError:
            continue  # cannot be removed here (a read-only folder): verify keeps reporting it
    return gone


def describe(found: Leftover) -> str:
    path, pid = found
    return f"{path.name} (left by process {pid}, {'still running' if running(pid) else 'not running'})"
