"""Generated code, compiled once per machine rather than once per process.

The encoders and converters are generated per class from the wire schema (``encoders.py``, ``wire.py``). Compiling
their source is most of what a first open costs at everyday sizes, and the source only changes with the library or
the Python version, so the compiled code is kept in the user's cache directory (``$XDG_CACHE_HOME/sessiontree/code``),
as ``__pycache__`` keeps a module's: named by a digest of the source and the interpreter, written private and
atomically, and compiled afresh whenever it is missing, unreadable or not the expected code object.
"""

from __future__ import annotations

import hashlib
import marshal
import os
import sys
import threading
from collections.abc import Sequence
from types import CodeType

from sessiontree.adapters import folders
from sessiontree.adapters.files import open_regular

_TAG = f"{sys.implementation.cache_tag}-{sys.version}".encode()
_MAX_BYTES = 1 << 20  # a generated function's code is a few KB; a decoder's converters together ~100 KB


def compiled(source: str, filename: str) -> CodeType:
    """``compile(source, filename, "exec")``, from the cache when it holds it."""
    path = _path(source, filename)
    kept = _read(path) if path is not None else None
    if isinstance(kept, CodeType) and kept.co_filename == filename:
        return kept
    code = compile(source, filename, "exec")
    if path is not None:
        _write(path, code)
    return code


def compiled_all(pieces: Sequence[tuple[str, str]]) -> list[CodeType]:
    """:func:`compiled` of several ``(source, filename)`` at once, kept in one file (a decoder's converters: one read)."""
    names = [filename for _, filename in pieces]
    path = _path("\0".join(source for source, _ in pieces), "\0".join(names))
    kept = _read(path) if path is not None else None
    if isinstance(kept, tuple) and len(kept) == len(names) and all(
        isinstance(code, CodeType) and code.co_filename == name for code, name in zip(kept, names)
    ):
        return list(kept)
    codes = [compile(source, filename, "exec") for source, filename in pieces]
    if path is not None:
        _write(path, tuple(codes))
    return codes


def _path(source: str, filename: str) -> str | None:
    base = folders.cache_home()
    if base is None:
        return None
    key = hashlib.sha256(_TAG + b"\0" + filename.encode() + b"\0" + source.encode()).hexdigest()[:40]
    return os.path.join(base, "sessiontree", "code", f"{key}.marshal")


def _read(path: str) -> object:
    """What the file at ``path`` holds, unmarshalled (None if it cannot be read): the caller checks it."""
    try:
        fd = open_regular(path, follow=False)
        try:
            data = os.read(fd, _MAX_BYTES)
        finally:
            os.close(fd)
        return marshal.loads(data)
    except (OSError, ValueError, EOFError, TypeError):
        return None


def _write(path: str, code: CodeType | tuple[CodeType, ...]) -> None:
    if not folders.private_parent(path):
        return
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with open(fd, "wb") as handle:
            handle.write(marshal.dumps(code))
        os.replace(tmp, path)
    except OSError:  # a read-only or full cache: the code was compiled, it just is not kept
        try:
            os.unlink(tmp)
        except OSError:
            pass
