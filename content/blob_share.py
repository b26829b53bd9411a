"""Content read back once per blob: the entries that refer to the same blob (a screenshot sent again and again) get
the same string object, so its memory and its read are paid once, up to a budget of bytes per storage."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sessiontree.content.blobs import fetch, unpacked

BUDGET = 64 << 20  # characters of content kept per storage; beyond it each read makes its own string
_FIELDS = ("data", "text", "thinking")


class SharedContent:
    """Strings of blobs already read, by digest (see the module documentation)."""

    def __init__(self, store: Any, budget: int = BUDGET) -> None:
        self.store = store
        self.budget = budget
        self._by_ref: dict[tuple[str, Any], str] = {}  # (digest, encoding): the string it reads as
        self._by_value: dict[str, str] = {}
        self._lengths: set[int] = set()
        self._used = 0

    def reader(self, where: Callable[[], str]) -> Callable[[dict[str, Any]], str]:
        """What ``blobs.resolve`` reads a reference with: the string read before, or the blob read, checked and kept."""

        def read(ref: dict[str, Any]) -> str:
            key = (str(ref.get("sha256")), ref.get("encoding"))
            found = self._by_ref.get(key)
            if found is not None:
                return found
            text = unpacked(fetch(self.store, ref, where), ref)  # checked against its digest as it is read
            if self._used + len(text) <= self.budget:
                self._by_ref[key] = self._by_value.setdefault(text, text)
                self._lengths.add(len(text))
                self._used += len(text)
            return text

        return read

    def share(self, entry: Any) -> Any:
        """``entry`` (just decoded, not yet seen by anyone) with each content string equal to a kept one replaced by it."""
        holder = getattr(entry, "message", entry)
        content = getattr(holder, "content", None)
        if isinstance(content, str):
            self._swap(holder, "content", content)
        elif isinstance(content, tuple):
            for block in content:
                for name in _FIELDS:
                    value = getattr(block, name, None)
                    if isinstance(value, str):
                        self._swap(block, name, value)
        return entry

    def _swap(self, obj: Any, name: str, value: str) -> None:
        if len(value) in self._lengths:
            kept = self._by_value.get(value)
            if kept is not None and kept is not value:
                object.__setattr__(obj, name, kept)  # a frozen value made a moment ago: only its string changes
