"""The cross-session listing index: one small summary per session, folded from its log.

A :class:`Summary` (what ``repo.list()`` shows) is folded from the lines' raw JSON, so every backend shares the
fold. :class:`DirectoryIndex` keeps a JSONL directory's summaries in one file (in the folder if it is sessiontree's
own, else in the user's cache directory) and, on ``refresh``, reads only what changed: a file that grew from where it
stopped, anything else from its first line. Deleting it is always safe.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import attrs
import msgspec

from sessiontree.domain.events import format_timestamp, parse_timestamp
from sessiontree.storage import folders
from sessiontree.storage.files import open_regular, read_lines
from sessiontree.wire import jsontext
from sessiontree.wire.jsontext import DECODE_ERRORS, decode, dumps, line_problem
from sessiontree.wire.schema import HEADER, LINE, LISTED, Listed, ListedMessage, header_of, line_of, message_of

INDEX_FILE = ".sessiontree-index.json"
INDEX_FORMAT = 2  # 2: ``modified`` is never before ``created`` (a fork made now lists as new)
MAX_INDEX_BYTES = 256 << 20  # an index past this is read as missing (rebuilt from the logs)


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


def _logs(root: str, unreadable: list[tuple[str, str]]) -> Iterator[tuple[str, str, os.stat_result]]:
    """The regular, not hidden ``*.jsonl`` files directly in ``root`` and in its not hidden sub-folders (pi keeps one
    per working directory), as (name relative to ``root``, path, ``stat``). Links are never followed. A folder or file
    that cannot be read is added to ``unreadable`` as (path, reason); a missing ``root`` lists nothing."""
    try:
        entries = list(os.scandir(root))
    except FileNotFoundError:
        return
    except OSError as exc:
        unreadable.append((root, _reason(exc)))
        return
    yield from _files(entries, "", unreadable)
    for folder in entries:
        if not folder.name.startswith(".") and folder.is_dir(follow_symlinks=False):
            try:
                inside = list(os.scandir(folder.path))
            except OSError as exc:
                unreadable.append((folder.path, _reason(exc)))
                continue
            yield from _files(inside, f"{folder.name}/", unreadable)


def unreadable_logs(root: str | os.PathLike[str]) -> list[tuple[str, str]]:
    """(path, reason) of each session file or folder of ``root`` (as a listing finds them) that cannot be read."""
    unreadable: list[tuple[str, str]] = []
    for _name, path, _st in _logs(os.fspath(root), unreadable):
        try:
            os.close(open_regular(path, follow=False))
        except OSError as exc:
            unreadable.append((path, _reason(exc)))
    return unreadable


def _reason(exc: OSError) -> str:
    return str(exc.strerror or exc)


def _files(
    entries: list[os.DirEntry[str]], prefix: str, unreadable: list[tuple[str, str]],
) -> Iterator[tuple[str, str, os.stat_result]]:
    for entry in entries:
        if not entry.name.endswith(".jsonl") or entry.name.startswith("."):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError as exc:
            unreadable.append((entry.path, _reason(exc)))
            continue
        if stat.S_ISREG(st.st_mode):  # a symlink, a FIFO, a device: never a session here
            yield prefix + entry.name, entry.path, st


def _stamped(st: os.stat_result) -> dict[str, int]:
    """What a record keeps of a file's ``stat`` to tell whether it changed: its size, times and inode (the change time
    moves with a new mode too, so a file that became unreadable, or readable again, is read again)."""
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ino": st.st_ino, "ctime_ns": st.st_ctime_ns}


def _stamp(record: dict[str, Any]) -> tuple[Any, ...]:
    return (record["size"], record["mtime_ns"], record["ino"], record.get("ctime_ns"))


def _fold_on(fd: int, summary: Summary | None, offset: int) -> tuple[Summary | None, int]:
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


class DirectoryIndex:
    """Summaries of every ``*.jsonl`` file in ``root`` and its sub-folders, cached in an index file: in the folder
    when it is sessiontree's own, else in the user's cache directory (``storage/folders.py``), so listing never
    writes into a folder of someone else's."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = os.fspath(root)
        self._files: dict[str, dict[str, Any]] | None = None
        self._kept_at: str | None = None  # where ``_files`` were last read from or written to
        self._summaries: dict[str, Summary] = {}  # decoded once per file version
        self.unreadable: list[tuple[str, str]] = []  # (path, reason) of what the last refresh could not read

    @property
    def path(self) -> str | None:
        """Where the index is kept now (None: nowhere, there is no cache directory)."""
        return self._where()[0]

    def _where(self) -> tuple[str | None, str | None]:
        """The index file, and the real path of ``root`` when that file is in the cache (None: in the folder)."""
        if folders.is_ours(self.root):
            return os.path.join(self.root, INDEX_FILE), None
        return folders.cached_index_path(self.root), os.path.realpath(self.root)

    def _load(self, path: str | None, real_root: str | None) -> dict[str, dict[str, Any]]:
        if path is None:
            return {}
        try:
            fd = open_regular(path, follow=False)
            try:
                data = decode(os.read(fd, MAX_INDEX_BYTES))
            finally:
                os.close(fd)
            # a cached index names its folder: a check against a hash collision
            if (isinstance(data, dict) and data.get("format") == INDEX_FORMAT and isinstance(data.get("files"), dict)
                    and data.get("root") == real_root):
                return data["files"]  # type: ignore[no-any-return]  # parsed JSON, checked to be a dict
        except (OSError, *DECODE_ERRORS):
            pass
        return {}  # missing or unreadable: rebuilt from the logs

    def _save(self, path: str | None, real_root: str | None, files: dict[str, dict[str, Any]]) -> None:
        if path is None or (real_root is not None and not folders.private_parent(path)):
            return  # no cache directory: listing still works, it just keeps nothing
        data: dict[str, Any] = {"format": INDEX_FORMAT, "files": files}
        if real_root is not None:
            data["root"] = real_root
        folders.write_private(path, dumps(data))  # private: it quotes first messages; a read-only folder keeps nothing

    def refresh(self) -> dict[str, Summary]:
        """Bring the index up to date with the directory; ``{file name: summary}`` (names relative to ``root``), shared
        with later calls (read them, do not change them)."""
        path, real_root = self._where()
        if self._files is None:
            files, changed = self._load(path, real_root), path is not None and not os.path.exists(path)
        else:  # the folder may have become ours since (adopted): the index moves in with the next save
            files, changed = self._files, path != self._kept_at
        seen: dict[str, dict[str, Any]] = {}
        unreadable: list[tuple[str, str]] = []
        for name, log, st in _logs(self.root, unreadable):
            record = files.get(name)
            if (record is None or "error" in record  # a file that could not be read is tried again (its mode may change)
                    or _stamp(record) != (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)):
                record = self._scan(log, st, record)
                changed = True
            if "error" in record:
                unreadable.append((log, record["error"]))
            seen[name] = record
        self.unreadable = unreadable
        self._files, self._kept_at = seen, path
        if (changed or set(files) != set(seen)) and os.path.isdir(self.root):
            self._save(path, real_root, seen)
        return self._decoded(seen)

    def _decoded(self, files: dict[str, dict[str, Any]]) -> dict[str, Summary]:
        """The summaries of ``files``, decoded again only where a file changed."""
        summaries = {}
        for name, record in files.items():
            data = record["summary"]
            if data is None:
                continue
            summary = self._summaries.get(name)
            if summary is None or summary.version != data["version"] or summary.modified != data["modified"]:
                summary = Summary.from_dict(data)
            summaries[name] = summary
        self._summaries = summaries
        return dict(summaries)

    def forget(self, name: str) -> None:
        """Drop a file from the index (after deleting it)."""
        if self._files is not None:
            self._files.pop(name, None)
        self._summaries.pop(name, None)

    def _scan(self, path: str, st: os.stat_result, record: dict[str, Any] | None) -> dict[str, Any]:
        """A new or changed file's record: folded on from where ``record`` stopped if the file only grew, else from line 1."""
        summary, offset = None, 0
        if (record is not None and record["summary"] is not None
                and record["ino"] == st.st_ino and 0 < record["offset"] <= st.st_size):
            summary, offset = Summary.from_dict(record["summary"]), record["offset"]
        try:
            fd = open_regular(path, follow=False)
            try:
                if offset and os.pread(fd, 1, offset - 1) != b"\n":  # rewritten, not appended: start over
                    summary, offset = None, 0
                summary, offset = _fold_on(fd, summary, offset)
            finally:
                os.close(fd)
        except OSError as exc:
            return {**_stamped(st), "offset": 0, "summary": None,
                    "error": _reason(exc)}
        if summary is None:
            return {**_stamped(st), "offset": 0, "summary": None}
        return {**_stamped(st), "offset": offset, "summary": summary.to_dict()}
