"""The listing's summaries: one small summary per session, folded from its log.

A :class:`Summary` (what ``repo.list()`` shows) is folded from the lines' raw JSON, so every backend shares the
fold; a JSONL directory keeps its summaries in its listing index (``storage/jsonl_repo.py``'s ``DirectoryIndex``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import attrs
import msgspec

from sessiontree.domain.events import format_timestamp, parse_timestamp
from sessiontree.storage.files import read_lines
from sessiontree.wire import jsontext
from sessiontree.wire.jsontext import line_problem
from sessiontree.wire.schema import HEADER, LINE, LISTED, Listed, ListedMessage, header_of, line_of, message_of


@attrs.define
class Summary:
    """The listing state of one session (mutable: it is the state of a fold)."""

    id: str
    cwd: str = ""
    created: str = ""
    modified: str = ""
    name: str | None = None
    message_count: int = 0
    first_message: str | None = None
    parent_session: str | None = None
    forked_at: str | None = None  # a fork's: the entry of the source its branch was copied up to
    version: int = 1  # events folded so far (the header is version 1)

    @classmethod
    def from_header(cls, data: Any) -> Summary | None:
        """The summary right after a header line (parsed, or its typed view), or None if ``data`` is not a header."""
        header = header_of(data)
        if header is None or header.type != "session":
            return None
        sid = header.id
        if not isinstance(sid, str) or not sid:
            return None
        timestamp = _str(header.timestamp) or ""
        parent = _str(header.parent_session)
        source = header.source
        forked_at = _str(source.get("entry_id")) if isinstance(source, Mapping) and parent else None
        return cls(id=sid, cwd=_str(header.cwd) or "", created=timestamp, modified=timestamp, parent_session=parent,
                   forked_at=forked_at)

    def apply(self, data: Any) -> None:
        """Fold one entry (a parsed JSON object in either dialect, or its typed view)."""
        self.version += 1
        entry = data if isinstance(data, Listed) else line_of(data)
        if entry is None:
            return
        timestamp = entry.timestamp
        if isinstance(timestamp, str):  # when the session was last written: a fork's copied entries keep older times
            self.modified = timestamp if sortable(timestamp) >= sortable(self.created) else self.created
        kind = entry.type
        if kind == "message":
            self.message_count += 1
            content = _user_content(entry.message) if self.first_message is None else _NOT_USER
            if content is not _NOT_USER:
                self.first_message = message_text(content)
        elif kind == "session_info":
            name = entry.name
            name = name.strip() if isinstance(name, str) else None
            self.name = name or None

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Summary:
        return cls(**{f.name: data[f.name] for f in attrs.fields(cls) if f.name in data})


def sortable(timestamp: str) -> str:
    """A string that sorts chronologically: our own ``...sss.mmmZ`` form as it is (the common
    case, no parsing), anything else converted to it ("" when it is not a time)."""
    if len(timestamp) == 24 and timestamp[-1] == "Z" and timestamp[10] == "T":
        return timestamp
    try:
        return format_timestamp(parse_timestamp(timestamp))
    except (ValueError, TypeError, IndexError, OverflowError):
        return ""


_NOT_USER = object()


def _user_content(message: Any) -> Any:
    """The content of a user message (``_NOT_USER`` for any other message, or one whose content cannot be read)."""
    if isinstance(message, ListedMessage):
        if message.role != "user":
            return _NOT_USER
        try:
            return msgspec.json.decode(message.content)
        except (msgspec.DecodeError, RecursionError):
            return _NOT_USER
    view = message_of(message)
    return view.content if view is not None and view.role == "user" else _NOT_USER


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def message_text(content: Any) -> str:
    """The text of a message's content: a string, or its text blocks joined by a space (text kept out of line gives
    the preview its reference holds: docs/file-format.md)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [_preview(b.get("text")) for b in content if isinstance(b, Mapping) and b.get("type") == "text"]
        return " ".join(p for p in parts if isinstance(p, str))
    found = _preview(content)
    return found if isinstance(found, str) else ""


def _preview(value: Any) -> Any:
    ref = value.get("$blob") if isinstance(value, Mapping) and len(value) == 1 else None
    return ref.get("preview") if isinstance(ref, Mapping) else value


def fold_lines(lines: Iterable[bytes | None]) -> Summary | None:
    """The summary of a whole log given as JSON lines (header first; None for an over-long line); None without a header."""
    summary: Summary | None = None
    for line in lines:
        summary = fold_line(summary, line)
        if summary is None:
            return None
    return summary


def fold_line(summary: Summary | None, line: bytes | None) -> Summary | None:
    """The summary after one more line (the header when ``summary`` is None; None if it is not one)."""
    if summary is None:
        return Summary.from_header(_decode(line, HEADER))
    summary.apply(_entry(line))
    return summary


def _entry(line: bytes | None) -> Any:
    """An entry line's view for the fold: its listed fields only, or all of them when those are not as expected."""
    try:
        return LISTED.decode(line) if line is not None and line_problem(line, duplicates=False) is None else None
    except msgspec.ValidationError:  # valid JSON, but a message that is not an object: read as it is
        return _decode(line, LINE)
    except (msgspec.DecodeError, RecursionError):
        return None


def _decode(line: bytes | None, decoder: msgspec.json.Decoder[Any]) -> Any:
    """The line's typed view, or None (listing is best effort; opening the session reports the bad line)."""
    if line is None or line_problem(line, duplicates=False) is not None:
        return None  # over the limits: not parsed (opening the session reports it)
    try:
        return decoder.decode(line)
    except (msgspec.DecodeError, RecursionError):  # not JSON, or not an object
        return None


def fold_on(fd: int, summary: Summary | None, offset: int) -> tuple[Summary | None, int]:
    """Fold the whole lines of ``fd`` from ``offset`` into ``summary`` (None: from the header, at offset 0); the summary
    and the end of the last line folded."""
    reached = offset

    def lines() -> Iterator[bytes | None]:
        nonlocal reached
        for line, end in read_lines(fd, offset, jsontext.MAX_LINE_BYTES):
            reached = end
            yield line

    if summary is None:
        summary = fold_lines(lines())
    else:
        for line in lines():
            summary.apply(_entry(line))
    return summary, reached
