"""Content out of line: large content is kept once in a content-addressed store, and the line holds a reference.

What goes out of line (native logs only; pi's format cannot hold a reference): every image's data, and a message's
text (its string content, or a text or thinking block) longer than the store's ``threshold`` in UTF-8 bytes. The
string is replaced in the line by ``{"$blob": {"sha256": ..., "size": ..., "media_type": ...}}`` (with
``"encoding": "base64"`` when the store holds an image's decoded bytes, and a text's first ``PREVIEW`` characters as
``"preview"``, for listings), so the hash chain seals the reference and the
reference names the content's digest: verify proves each blob matches (docs/audit.md, docs/file-format.md).

Lines are outlined after they are encoded and inlined before they are decoded, so the codec, the domain and every
reader above the storage see the content as it was written: an ``ImageContent`` keeps its ``data``, read from the
store when its entry is decoded; ``SharedContent`` reads each blob once for the entries that refer to it.
"""

from __future__ import annotations

import binascii
import hashlib
from collections.abc import Callable, Iterator
from typing import Any

import msgspec

from sessiontree.domain.errors import SessionError
from sessiontree.wire.jsontext import parse
from sessiontree.wire.schema import MIME_TYPE_KEY, line_of

# a parsed line written again as the native codec writes it (msgspec's layout: a float of 1e16 or more as ``1e16``), so
# that outlining and inlining change nothing else in the line
dumps = msgspec.json.Encoder().encode

KEY = "$blob"
MARKER = b'"$blob"'  # structural only: inside a JSON string the quotes would be escaped
IMAGE = b'"type":"image"'
TEXT = "text/plain; charset=utf-8"
DEFAULT_THRESHOLD = 64 * 1024
PREVIEW = 200  # characters of a text kept in its reference (checked against the blob like the rest)
_ROLES = frozenset(("user", "assistant", "tool_result", "custom"))  # the native roles whose content is ours to outline
Slot = tuple[dict[str, Any], str, "str | None"]  # the object, its key, and an image's media type (None: text)


def slots(data: Any) -> Iterator[Slot]:
    """The places in an entry's wire dict that may hold content out of line: a message's (or a custom message
    entry's) string content, its text and thinking blocks' text, and its images' data."""
    entry = line_of(data) if isinstance(data, dict) else None
    if entry is None:
        return
    kind = entry.type
    holder = entry.message if kind == "message" else data if kind == "custom_message" else None
    if not isinstance(holder, dict) or (kind == "message" and holder.get("role") not in _ROLES):
        return  # a message of a role this library does not know is kept as it was written, never outlined
    content = holder.get("content")
    if not isinstance(content, list):
        if isinstance(content, (str, dict)):
            yield holder, "content", None
        return
    for block in content:
        if not isinstance(block, dict):
            continue
        tag = block.get("type")
        if tag == "text" or tag == "thinking":
            yield block, tag, None
        elif tag == "image":
            mime = block.get(MIME_TYPE_KEY)
            yield block, "data", mime if isinstance(mime, str) else "application/octet-stream"




def ref_of(value: Any) -> dict[str, Any] | None:
    """The reference a slot's value is, or None for content written inline."""
    if isinstance(value, dict) and len(value) == 1:
        ref = value.get(KEY)
        if isinstance(ref, dict):
            return ref
    return None


def refs(line: bytes) -> list[dict[str, Any]]:
    """Every reference a stored line holds (none for most lines: the marker is looked for first)."""
    if MARKER not in line:
        return []
    try:
        data = parse(line)
    except (ValueError, RecursionError):
        return []
    return [ref for holder, key, _ in slots(data) if (ref := ref_of(holder.get(key))) is not None]


def is_digest(value: Any) -> bool:
    """Is ``value`` a SHA-256 digest as references name them (64 lowercase hex digits: safe in a path)?"""
    return isinstance(value, str) and len(value) == 64 and not value.strip("0123456789abcdef")


def check_ref(ref: dict[str, Any]) -> str | None:
    """What is wrong with a reference's fields, or None."""
    digest, size = str(ref.get("sha256")), ref.get("size")
    if not is_digest(digest):
        return f"a content reference names no sha256 digest: {ref!r:.120}"
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        return f"content {digest[:12]} has no size"
    if ref.get("encoding") not in (None, "base64") or not isinstance(ref.get("media_type"), str):
        return f"content {digest[:12]} has an unknown encoding or no media type"
    if not isinstance(ref.get("preview", ""), str):
        return f"content {digest[:12]} has a preview that is not text"
    return None


def packed(text: str, mime: str | None) -> tuple[bytes, dict[str, Any]]:
    """The bytes a store keeps for a slot's string, and their reference. An image's base64 is kept decoded when
    encoding it again gives the same text (so the blob is the image itself); anything else as its UTF-8."""
    if mime is not None:
        raw = _canonical_base64(text)
        if raw is not None:
            return raw, {"sha256": hashlib.sha256(raw).hexdigest(), "size": len(raw), "media_type": mime,
                         "encoding": "base64"}
    data = text.encode("utf-8")
    ref = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "media_type": mime or TEXT}
    if mime is None:  # listings quote a session's first message without reading the store
        ref["preview"] = text[:PREVIEW]
    return data, ref


_SEXTETS = {c: i for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")}


def _canonical_base64(text: str) -> bytes | None:
    """The bytes ``text`` encodes, when encoding them gives ``text`` back exactly (strict alphabet and padding, and
    zero bits after the last byte); else None."""
    if len(text) % 4:
        return None
    try:
        raw = binascii.a2b_base64(text, strict_mode=True)
    except (binascii.Error, ValueError):
        return None
    unused = 0b1111 if text.endswith("==") else 0b11 if text.endswith("=") else 0
    return raw if not unused or _SEXTETS[text.rstrip("=")[-1]] & unused == 0 else None


def unpacked(data: bytes, ref: dict[str, Any]) -> str:
    """The slot's string again from a blob's bytes (``corrupt`` when a text's bytes are not UTF-8)."""
    if ref.get("encoding") == "base64":
        return binascii.b2a_base64(data, newline=False).decode("ascii")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise SessionError("corrupt", f"content {str(ref.get('sha256'))[:12]} is not UTF-8 text, as its reference "
                           "says") from None


def outline(line: bytes, store: Any, put: list[tuple[str, bytes]] | None = None, *, defer: bool = False) -> bytes:
    """``line`` with its large content put into ``store`` and replaced by references (the same line when it has none).
    The store's blobs are written before the line that refers to them, as durably as the store writes; ``put`` gets
    each ``(digest, bytes)``; ``defer``: only there, not in the store (a database writer stores them with its line:
    ``recorder.py``)."""
    threshold = store.threshold
    if threshold is None or (len(line) <= threshold and IMAGE not in line):
        return line
    try:
        data = parse(line)  # integers of any size kept exact
    except (ValueError, RecursionError):
        return line
    changed = False
    for holder, key, mime in slots(data):
        value = holder.get(key)
        if not isinstance(value, str):
            continue
        if mime is None and (len(value) <= threshold // 4 or len(value.encode("utf-8")) <= threshold):
            continue  # text within the threshold (four bytes a character at most)
        blob, ref = packed(value, mime)
        if not defer:
            store.put(ref["sha256"], blob)
        if put is not None:
            put.append((ref["sha256"], blob))
        holder[key] = {KEY: ref}
        changed = True
    return dumps(data) if changed else line


def inline(line: bytes, store: Any, where: Callable[[], str] = lambda: "", read: Any = None) -> bytes:
    """``line`` with every reference replaced by its content read from ``store`` (``corrupt`` when it is missing or
    does not match its digest), or by ``read(ref)`` when given (``SharedContent``)."""
    if MARKER not in line:
        return line
    try:
        data = parse(line)
    except (ValueError, RecursionError):
        return line  # the codec says what is wrong with it
    return dumps(data) if resolve(data, store if read is None or store is None else read, where) else line


def resolve(data: Any, store: Any, where: Callable[[], str] = lambda: "") -> bool:
    """Replace the references in a parsed line by their content, read from ``store`` (or given by ``store(ref)``
    when it is a function); whether there were any."""
    changed = False
    for holder, key, _ in slots(data):
        ref = ref_of(holder.get(key))
        if ref is None:
            continue
        if store is None:
            raise SessionError("corrupt", f"{where()}content {str(ref.get('sha256'))[:12]} is out of line, and this "
                               "log has no content store to read it from")
        holder[key] = store(ref) if callable(store) else unpacked(fetch(store, ref, where), ref)
        changed = True
    return changed


def fetch(store: Any, ref: dict[str, Any], where: Callable[[], str] = lambda: "") -> bytes:
    """A referenced blob's bytes, checked against the reference (``corrupt`` otherwise)."""
    problem = check_ref(ref)
    if problem is not None:
        raise SessionError("corrupt", where() + problem)
    digest = ref["sha256"]
    data: bytes | None = store.get(digest, ref["size"])
    if data is None:
        raise SessionError("corrupt", f"{where()}content {digest[:12]} ({ref['size']} bytes) is missing from "
                           f"{store.location}")
    if len(data) != ref["size"] or hashlib.sha256(data).hexdigest() != digest:
        raise SessionError("corrupt", f"{where()}content {digest[:12]} in {store.location} does not match its digest")
    preview = ref.get("preview")
    if preview and not data.decode("utf-8", "replace").startswith(preview):
        raise SessionError("corrupt", f"{where()}content {digest[:12]}: the preview in the line is not how it starts")
    return data


BUDGET = 64 << 20  # characters of content kept per storage; beyond it each read makes its own string
_FIELDS = ("data", "text", "thinking")


class SharedContent:
    """Content read back once per blob: the entries that refer to the same blob (a screenshot sent again and again) get
    the same string object, so its memory and its read are paid once, up to a budget of characters per storage."""

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
