"""What full-text search sees of an entry, and the query language every search backend shares.

Search reads the entries in their wire form (a parsed JSON line, either dialect: ours or pi's camelCase), as the
listing index does, so a folder of pi's files is indexed without building domain objects. Words are cut here, once,
for every backend: the SQLite index and PostgreSQL store the words this module makes and are asked for the words it
makes of the query, so the same entries match everywhere (only the ranking differs).

A query is words; an entry matches when it holds every word. ``word*`` matches words starting with ``word``;
``-word`` leaves out entries holding it. Case does not matter. Quotes and other punctuation only separate words.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from sessiontree.content.blobs import MARKER, fetch, resolve, unpacked
from sessiontree.domain.erasure import RECORD_TYPE
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import format_timestamp, parse_timestamp
from sessiontree.wire.jsontext import dumps
from sessiontree.wire.pi_names import TOOL_CALL_BLOCK, TOOL_RESULT_ROLE
from sessiontree.wire.schema import Line, line_of, message_of

_WORD = re.compile(r"[^\W_]+")
MAX_WORD = 100  # a longer run of letters (base64, a hash) is cut here: nobody types it, and PostgreSQL caps lexemes
ROLES = {"user": "user", "assistant": "assistant", "tool_result": "tool", TOOL_RESULT_ROLE: "tool"}
MAX_TEXT = 1 << 17  # characters of one entry that are searched (PostgreSQL caps a tsvector at 1 MB)
MARK = ("**", "**")  # how a snippet marks the words that matched


def words(text: str) -> list[str]:
    """The words of ``text`` as search sees them: runs of letters and digits, case-folded."""
    return [w[:MAX_WORD] for w in _WORD.findall(text.casefold())]


@attrs.frozen
class Query:
    """A parsed query: ``required`` words (``(word, prefix)``), all needed; ``excluded`` ones, none allowed."""

    text: str
    required: tuple[tuple[str, bool], ...]
    excluded: tuple[tuple[str, bool], ...] = ()

    def matches(self, entry_words: Iterable[str]) -> bool:
        """Does an entry with these words match (the reference every backend agrees with)?"""
        have = set(entry_words)
        return all(_has(have, t) for t in self.required) and not any(_has(have, t) for t in self.excluded)

    def hits(self, word: str) -> bool:
        """Is ``word`` one that a required term matches (for marking a snippet)?"""
        return any(word == w or (prefix and word.startswith(w)) for w, prefix in self.required)


def _has(have: set[str], term: tuple[str, bool]) -> bool:
    word, prefix = term
    return word in have if not prefix else any(w.startswith(word) for w in have)


def parse_query(text: str) -> Query:
    """The query ``text`` means; ``ValueError`` when it has no word to look for."""
    if not isinstance(text, str):
        raise TypeError(f"a search query must be a str, not {text!r}")
    required: dict[tuple[str, bool], None] = {}
    excluded: dict[tuple[str, bool], None] = {}
    for raw in text.split():
        negated = raw.startswith("-") and len(raw) > 1
        body = raw[1:] if negated else raw
        prefix = body.endswith("*")
        found = words(body.rstrip("*"))
        for i, word in enumerate(found):
            term = (word, prefix and i == len(found) - 1)
            (excluded if negated else required)[term] = None
    if not required:
        raise ValueError(f"the query {text!r} has no word to search for (letters or digits)")
    return Query(text, tuple(required), tuple(excluded))


def _text_blocks(content: Any, out: list[str]) -> None:
    if isinstance(content, str):
        out.append(content)
        return
    if not isinstance(content, list):
        return
    for block in content:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text" or kind == "thinking":
            value = block.get(kind)
            if isinstance(value, str):
                out.append(value)
        elif kind in ("tool_call", TOOL_CALL_BLOCK):
            name, arguments = block.get("name"), block.get("arguments")
            if isinstance(name, str):
                out.append(name)
            if arguments is not None:
                out.append(_json_text(arguments))


def _json_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return dumps(value).decode()
    except TypeError:
        return ""


def entry_text(data: Any) -> tuple[str, str] | None:
    """``(kind, text)`` of one entry (its wire JSON, either dialect): the kind is a message's role (``user``,
    ``assistant``, ``tool``, or its own role) or the entry's type; None for an entry with no text to search."""
    entry = line_of(data)
    return None if entry is None else _entry_text(entry)


def _entry_text(entry: Line) -> tuple[str, str] | None:
    kind = entry.type
    out: list[str] = []
    if kind == "message":
        message = message_of(entry.message)
        if message is None:
            return None
        role = message.role
        kind = ROLES.get(role, role) if isinstance(role, str) else "message"
        if kind == "tool":
            name = message.name_of_tool
            if isinstance(name, str):
                out.append(name)
        _text_blocks(message.content, out)
        for value in (message.summary, message.command, message.output):  # summary messages; pi's bashExecution
            _append_str(out, value)
    elif kind in ("compaction", "branch_summary"):
        _append_str(out, entry.summary)
    elif kind == "label":
        _append_str(out, entry.label)
    elif kind == "session_info":
        _append_str(out, entry.name)
    elif kind == "custom_message":
        _text_blocks(entry.content, out)
    else:
        return None
    text = "\n".join(p for p in out if p)[:MAX_TEXT]
    return (kind, text) if text.strip() and isinstance(kind, str) else None


def _append_str(out: list[str], value: Any) -> None:
    if isinstance(value, str):
        out.append(value)


def snippet(text: str, query: Query, width: int = 160) -> str:
    """About ``width`` characters of ``text`` around its first word that matched, each matching word marked ``**``."""
    spans = _spans(text, query)
    start = max(0, spans[0][0] - width // 3) if spans else 0
    end = min(len(text), start + width)
    pieces, pos = [], start
    for s, e in spans:
        if s < start or e > end:
            continue
        pieces += [text[pos:s], MARK[0], text[s:e], MARK[1]]
        pos = e
    pieces.append(text[pos:end])
    out = " ".join("".join(pieces).split())
    return ("…" if start > 0 else "") + out + ("…" if end < len(text) else "")


def _spans(text: str, query: Query) -> list[tuple[int, int]]:
    """Where the words that matched are: candidates found by one regular expression (any case), each checked as
    search checks words (a word that matches only once case-folded, such as ``ß`` for ``ss``, goes unmarked)."""
    return [m.span() for m in _pattern(query.required).finditer(text) if query.hits(m.group().casefold()[:MAX_WORD])]


@functools.lru_cache(maxsize=64)
def _pattern(required: tuple[tuple[str, bool], ...]) -> re.Pattern[str]:
    terms = "|".join(re.escape(w) + (r"[^\W_]*" if prefix else "") for w, prefix in required)
    return re.compile(rf"(?<![^\W_])(?:{terms})(?![^\W_])", re.IGNORECASE)


@attrs.frozen
class Row:
    """One entry as the search index keeps it: every entry has a row (the tree needs them all), ``text`` only some."""

    seq: int  # the entry's version (line number; the header is 1)
    entry_id: str
    parent_id: str | None
    kind: str
    timestamp: str  # sortable: ``YYYY-MM-DDTHH:MM:SS.mmmZ``
    text: str | None
    leaf: str | None  # the leaf once this entry is appended
    at: int = -1  # where its line starts in its file (-1: a row of a database, found by ``seq``)

    @property
    def words(self) -> str:
        return " ".join(words(self.text)) if self.text else ""


def with_text(data: Any, line: bytes | None, store: Any) -> Any:
    """A parsed line with the text it keeps out of line read back (images left out: search has no use for them); a
    blob that cannot be read leaves its text unsearched (verify and open report it)."""
    if line is None or MARKER not in line:
        return data

    def text(ref: dict[str, Any]) -> str:
        if not str(ref.get("media_type", "")).startswith("text/"):
            return ""
        try:
            return unpacked(fetch(store, ref), ref)
        except (SessionError, UnicodeDecodeError):
            return ""

    try:
        resolve(data, text)
    except SessionError:
        pass
    return data


def entry_row(seq: int, data: Any, at: int = -1) -> Row | None:
    """The row of one entry line (parsed JSON, either dialect; ``at``: where the line starts in its file); None for a
    line that is not an entry."""
    entry = line_of(data)
    if entry is None:
        return None
    entry_id = entry.id
    if not isinstance(entry_id, str):
        return None
    parent = entry.parent
    parent = parent if isinstance(parent, str) else None
    kind = entry.type
    leaf: str | None = entry_id
    if kind == "leaf":
        target = entry.target_native
        leaf = target if isinstance(target, str) else None
    elif entry.pi_leaf_marker():  # pi's leaf move: parentId is the new leaf, data.fromId the old one
        leaf, fro = parent, entry.moved_from()
        parent = fro if isinstance(fro, str) else None
    found = _entry_text(entry)
    kind_text = found[0] if found else (kind if isinstance(kind, str) else "unknown")
    return Row(seq, entry_id, parent, kind_text, sortable_time(entry.timestamp), found[1] if found else None, leaf, at)


def backs(hit: Any, data: Any, line: bytes, store: Any) -> bool:
    """Does the entry line ``line`` (parsed: ``data``) back the search hit: the same entry, kind and text?"""
    row = entry_row(hit.seq, with_text(data, line, store))
    return (row is not None and row.entry_id == hit.entry_id and row.kind == hit.kind
            and _shown(row.text) == _shown(hit.text))


def _shown(text: str | None) -> str | None:
    return text.replace("\x00", "\ufffd") if text else text  # as PostgreSQL keeps it (no NUL character)


def erased_id(data: Any) -> str | None:
    """The entry a redaction record erased (None for any other line): its text leaves the index at once, whether or
    not the line itself was rewritten yet (docs/audit.md, *Erasure*)."""
    entry = line_of(data)
    if entry is not None and entry.type == "custom" and entry.custom_type == RECORD_TYPE:
        payload = entry.data
        target = payload.get("entry_id") if isinstance(payload, Mapping) else None
        return target if isinstance(target, str) else None
    return None


def without_erased(rows: list[Row], erased: set[str]) -> list[Row]:
    """``rows`` with no text for the entries erased."""
    return [attrs.evolve(row, text=None) if row.entry_id in erased else row for row in rows] if erased else rows


def sortable_time(value: Any) -> str:
    """A timestamp as text that sorts in time order (our own form kept as it is); "" when it cannot be read."""
    if not isinstance(value, str):
        return ""
    if len(value) == 24 and value[10] == "T" and value[-1] == "Z":
        return value
    try:
        return format_timestamp(parse_timestamp(value))
    except (ValueError, TypeError, OverflowError):
        return ""


def same_place(cwd: str) -> str:
    """A working directory as listing compares them (``jsonl_repo.same_place``): an absolute path normalised, anything
    else as it is."""
    return os.path.normpath(cwd) if os.path.isabs(cwd) else cwd
