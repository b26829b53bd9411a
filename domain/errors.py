"""The one error type of the library, with a small closed set of codes."""

from __future__ import annotations

CODES = frozenset({
    "not_found", "already_exists", "invalid_entry", "invalid_fork_target", "conflict", "corrupt", "unsupported_version", "storage"
})


class SessionError(Exception):
    """A failure a caller can act on; ``code`` (one of :data:`CODES`) says which kind (see docs/concepts.md).

    The message names the session, file, line or entry involved. ``path`` and ``line`` are set when the error comes from a file.
    """

    def __init__(self, code: str, message: str, *, path: str | None = None, line: int | None = None) -> None:
        if code not in CODES:
            raise ValueError(f"unknown SessionError code {code!r}")
        self.code = code
        self.message = message
        self.path = path
        self.line = line
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        super().__init__(f"{code}: {where}{message}")
