"""How verify reads out-of-line content (``blob_stores.py`` has the stores, ``verify.py`` the rest of the check)."""

from __future__ import annotations

from typing import Any

from sessiontree.content.blob_stores import BlobStore
from sessiontree.content.blobs import PREVIEW, check_ref, fetch
from sessiontree.domain.errors import SessionError


class BlobCheck:
    """What verify reads out-of-line content with: each blob once, checked against its digest (a missing or altered
    one is a problem of every line that refers to it, ``line``), then each reference against what was read (its size
    and preview); given back as an empty string for the line's structure check (the entry itself stays in the tree)."""

    def __init__(self, store: BlobStore | None, report: Any) -> None:
        self.store = store
        self.report = report
        self.line = 0
        self.seen: dict[str, tuple[str | None, int, bytes]] = {}  # digest: (its problem, its size, its first bytes)

    def __call__(self, ref: dict[str, Any]) -> str:
        problem = check_ref(ref)
        if problem is None:
            digest = ref["sha256"]
            if digest not in self.seen:
                self.seen[digest] = self._read(ref)
                self.report.blobs += self.seen[digest][0] is None
            problem, size, head = self.seen[digest]
            preview = ref.get("preview")
            if problem is None and size != ref["size"]:
                problem = f"content {digest[:12]} is {size} bytes, not the {ref['size']} its reference says"
            elif problem is None and preview and not head.decode("utf-8", "ignore").startswith(preview):
                problem = f"content {digest[:12]}: the preview in the line is not how it starts"
        if problem is not None:
            self.report.problem(self.line, problem)
        return ""

    def _read(self, ref: dict[str, Any]) -> tuple[str | None, int, bytes]:
        if self.store is None:
            return f"content {ref['sha256'][:12]} is out of line, and this log has no content store to read it from", 0, b""
        try:
            data = fetch(self.store, {**ref, "preview": ""})
        except SessionError as exc:
            return exc.message, 0, b""
        return None, len(data), data[: 4 * PREVIEW + 4]
