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
from types import CodeType

from sessiontree.adapters import folders
from sessiontree.adapters.files import open_regular

_TAG = f"{sys.implementation.cache_tag}-{sys.version}".encode()
_MAX_BYTES = 1 << 20  # a generated function's code is a few KB


def compiled(source: str, filename: str) -> CodeType:
    """``compile(source, filename, "exec")``, from the cache when it holds it."""
    path = _path(source, filename)
    if path is not None:
        code = _read(path, filename)
        if code is not None:
            return code
    code = compile(source, filename, "exec")
    if path is not None:
        _write(path, code)
    return code


def _path(source: str, filename: str) -> str | None:
    base = folders.cache_home()
    if base is None:
        return None
    key = hashlib.sha256(_TAG + b"\0" + filename.encode() + b"\0" + source.encode()).hexdigest()[:40]
    return os.path.join(base, "sessiontree", "code", f"{key}.marshal")


def _read(path: str, filename: str) -> CodeType | None:
    try:
        fd = open_regular(path, follow=False)
        try:
            data = os.read(fd, _MAX_BYTES)
        finally:
            os.close(fd)
        code = marshal.loads(data)
    except (OSError, ValueError, EOFError, TypeError):
        return None
    return code if isinstance(code, CodeType) and code.co_filename == filename else None


def _write(path: str, code: CodeType) -> None:
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
