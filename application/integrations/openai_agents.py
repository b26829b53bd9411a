"""The OpenAI Agents SDK's session store, on a sessiontree session (docs/integrations.md, "OpenAI Agents SDK").

``SessionTreeSession(session_id, repo=...)`` is an ``agents.memory.Session``. Each item is an entry on the session's
current branch (``openai_agents_items``: a message where the item maps to one, else a custom entry), so ``sessiontree
show``, ``context``, ``verify`` and ``export --format pi`` work on what the agent wrote. ``pop_item`` and
``clear_session`` move the leaf; nothing is ever deleted. ``get_items`` gives the items repaired by the tool-call rule
(``repair_tool_pairs``, docs/concepts.md): a run interrupted between a function call and its output loads as a history
the next run's model call accepts; ``repair=False`` gives the items as stored. Like the SDK's ``SQLiteSession``, any
number of stores, in any processes, share one session id, none ever closed: each call reads on to the log's leaf (the
last append's, by any writer) and appends there, so their items interleave in one history.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from sessiontree.integrations import missing_extra

try:
    from agents.memory.session_settings import SessionSettings, coerce_session_settings, resolve_session_limit
except ModuleNotFoundError as exc:  # without the extra: say which, and the pip command
    raise missing_extra(exc, __name__) from None

from sessiontree.domain import aggregate as commands
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import CustomEntryAppended, Entry, MessageAppended
from sessiontree.domain.messages import AssistantMessage, ToolCall, ToolResultMessage
from sessiontree.domain.values import json_value
from sessiontree.integrations._blocking import as_repo, call
from sessiontree.integrations.openai_agents_items import CUSTOM_TYPE, KEY, Message, to_item, to_message
from sessiontree.projections import tool_pairs
from sessiontree.repository import SessionRepo
from sessiontree.session import Session
from sessiontree.storage.store import check_session_id

if TYPE_CHECKING:
    from agents.items import TResponseInputItem

T = TypeVar("T")
_UNREAD = object()  # the leaf of a store that has not read its session yet
_encode = msgspec.json.encode
_decode = msgspec.json.decode


class SessionTreeSession:
    """An ``agents.memory.Session`` whose items are the entries of a sessiontree session.

    ``repo`` is a repository, or a URL or folder for ``open_repo`` (a repository it opens is closed by :meth:`close`). The
    session ``session_id`` is created there on first use if it does not exist (in ``cwd``, default the current
    directory). ``get_items`` reads the branch ending at the log's leaf (the last append's, by any store or process);
    ``add_items`` appends there, the items of one call together; ``pop_item`` moves the leaf to the parent of the last
    item's entry (only if no other writer appended meanwhile: else it reads again and retries) and ``clear_session``
    before the first entry, so the log keeps every item ever added. ``get_items`` repairs
    the tool calls of what it returns (a missing output becomes an error output, an orphan one is left out), unless
    ``repair`` is False; the log keeps what was added.
    """

    session_settings: SessionSettings | None = None

    def __init__(
        self, session_id: str, repo: SessionRepo | str | os.PathLike[str], *,
        session_settings: SessionSettings | dict[str, Any] | None = None, cwd: str | None = None, repair: bool = True,
    ) -> None:
        self.session_id = check_session_id(session_id)
        self.session_settings = coerce_session_settings(session_settings) if session_settings is not None else SessionSettings()
        self.repo = as_repo(os.fspath(repo) if isinstance(repo, os.PathLike) else repo)
        self._owns_repo = not isinstance(repo, SessionRepo)
        self._cwd = os.getcwd() if cwd is None else cwd
        self.repair = repair
        self._pairing = tool_pairs.PairingCheck(runs=True)  # whether the items read so far need repairing
        self._pairing_last: Entry | None = None  # the last item's entry it checked
        self._repaired: tuple[Entry, int, list[bytes]] | None = None  # (last entry, item count, blobs) last repaired
        self._session: Session | None = None
        self._closed = False
        # The items on the branch ending at ``_leaf``, kept as JSON: a read decodes them in one call (fresh objects
        # for the caller, as a database read gives) instead of rebuilding each item from its entry.
        self._leaf: object = _UNREAD
        self._entries: list[Entry] = []  # the entry of each item
        self._blobs: list[bytes] = []
        self._tool_names: dict[str, str] = {}  # call id -> tool name, for outputs that do not name their tool
        self._mutex = threading.RLock()  # the state above, whichever thread (worker or event loop) runs a call
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()

    def __repr__(self) -> str:
        return f"SessionTreeSession({self.session_id!r}, repo={self.repo!r})"

    @property
    def session(self) -> Session:
        """The sessiontree session behind this store, opened (or created) if need be: a blocking call."""
        with self._mutex:
            return self._open()

    # -- agents.memory.Session --------------------------------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The items on the current branch, oldest first: the latest ``limit`` of them (default
        ``session_settings.limit``; None: all, 0: none; a negative limit is no limit, as in the SDK's SQLiteSession)."""
        return await self._run(self._get_items, resolve_session_limit(limit, self.session_settings))

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append the items to the current branch, one entry each. Every item is checked (a JSON value) before any is
        written; a storage failure part way leaves the items written so far."""
        await self._run(self._add_items, items)

    async def pop_item(self) -> TResponseInputItem | None:
        """The latest item, after moving the leaf to the parent of its entry; None (and nothing written) if there is none."""
        return await self._run(self._pop_item)

    async def clear_session(self) -> None:
        """Move the leaf before the first entry: the next item starts a new root. Nothing is deleted."""
        await self._run(self._clear_session)

    def close(self) -> None:
        """Close the session (its file or connection) and a repository opened from a URL; stores need not be closed
        for others to write."""
        with self._mutex:
            if self._session is not None:
                self._session.close()
            if self._owns_repo and not self._closed:
                self.repo.close()
            self._session, self._closed = None, True

    # -- one call at a time -----------------------------------------------------------------------------------------

    async def _run(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` after the calls made before it on this event loop: inline on files and memory, in a
        worker thread on a database, and in a worker thread for the first call, which reads the whole log."""
        loop = asyncio.get_running_loop()
        lock = self._locks.get(loop)
        if lock is None:
            lock = self._locks[loop] = asyncio.Lock()
        async with lock:
            if self._leaf is _UNREAD:
                return await asyncio.to_thread(self._locked, function, *args)
            return await call(self.repo, self._locked, function, *args)

    def _locked(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` under the mutex. A conflict (another writer appended to the session) is raised, and the
        session dropped, so the next call reads the log again and sees what the other writer wrote."""
        with self._mutex:
            try:
                return function(*args)
            except SessionError as exc:
                if exc.code == "conflict" and self._session is not None:
                    self._session.close()
                    self._session, self._leaf = None, _UNREAD
                raise

    def _open(self) -> Session:
        if self._closed:
            raise RuntimeError(f"{self!r} is closed")
        if self._session is None:
            try:
                self._session = self.repo.open(self.session_id)
            except SessionError as exc:
                if exc.code != "not_found":
                    raise
                self._session = self._create()
        return self._session

    def _create(self) -> Session:
        try:
            return self.repo.create(cwd=self._cwd, session_id=self.session_id)
        except SessionError as exc:  # another writer created it first
            if exc.code != "already_exists":
                raise
            return self.repo.open(self.session_id)

    def _read(self) -> Session:
        """The session read on to the log's leaf, with the items cached for it: extended by the entries appended under
        the leaf cached before, or read again when the leaf moved elsewhere (a pop or a clear, here or by another)."""
        session = self._open()
        session.refresh(follow=True)
        leaf = session.leaf_id
        if self._leaf != leaf and not self._extend(session, leaf):
            entries: list[Entry] = []
            blobs: list[bytes] = []
            names: dict[str, str] = {}
            for entry in session.get_branch():
                item = _item_of(entry)
                if item is not _NOT_AN_ITEM:
                    entries.append(entry)
                    blobs.append(_encode(item))
                    _note_tool_name(names, item)
            self._entries, self._blobs, self._tool_names, self._leaf = entries, blobs, names, leaf
        return session

    def _extend(
        self, session: Session, leaf: str | None, most: int = 256, own: dict[str, tuple[Any, bytes]] | None = None,
    ) -> bool:
        """Take in the items between the cached leaf and ``leaf`` when the cached one is on ``leaf``'s branch (within
        ``most`` entries); False if it is not. ``own``: the items this store just added, by entry id (kept as the caller
        gave them, key order included, as a database row keeps them)."""
        if self._leaf is _UNREAD or leaf is None:
            return False
        added: list[Entry] = []
        at: str | None = leaf
        while at != self._leaf:
            if at is None or len(added) >= most:
                return False
            entry = session.entry(at)
            added.append(entry)
            at = entry.parent_id
        for entry in reversed(added):
            data, blob = own[entry.id] if own and entry.id in own else (_item_of(entry), None)
            if data is not _NOT_AN_ITEM:
                self._entries.append(entry)
                self._blobs.append(blob if blob is not None else _encode(data))
                _note_tool_name(self._tool_names, data)
        self._leaf = leaf
        return True

    # -- the calls (each run by _locked) ---------------------------------------------------------------------------

    def _get_items(self, limit: int | None) -> list[Any]:
        self._read()
        blobs = self._repaired_blobs() if self.repair else self._blobs
        blobs = blobs if limit is None or limit < 0 else blobs[-limit:] if limit else []
        return _decode(b"[" + b",".join(blobs) + b"]")  # type: ignore[no-any-return]  # a JSON array: a list

    def _repaired_blobs(self) -> list[bytes]:
        """The items as the tool-call rule repairs them (one reply's items are one turn), kept until the items change."""
        entries, check = self._entries, self._pairing
        if check.count > len(entries) or (check.count and entries[check.count - 1] is not self._pairing_last):
            check = self._pairing = tool_pairs.PairingCheck(runs=True)  # not the items it saw: start again
        check.feed(map(_pairing_view, entries[check.count:]))  # only what was appended since the last read
        self._pairing_last = entries[-1] if entries else None
        if check.valid:
            return self._blobs
        kept = self._repaired
        if kept is None or kept[0] is not entries[-1] or kept[1] != len(entries):
            views = [_pairing_view(entry) for entry in entries]
            stored = {id(view): blob for view, blob in zip(views, self._blobs, strict=True)}
            blobs = [stored[id(e)] if id(e) in stored else _encode(_repaired_item(e))
                     for e in tool_pairs.repair(views, runs=True)]
            kept = self._repaired = (entries[-1], len(entries), blobs)
        return kept[2]

    def _add_items(self, items: Iterable[Any]) -> None:
        session = self._read()
        batch: list[Any] = []
        planned = self._plan(items)
        for data, _, message in planned:
            if message is None:
                batch.append(lambda agg, id, now, data=data: commands.append_custom_entry(agg, CUSTOM_TYPE, data, id=id,
                                                                                          timestamp=now))
            else:
                batch.append(lambda agg, id, now, message=message: commands.append_message(agg, message, id=id,
                                                                                           timestamp=now))
        # one write after the log's leaf at write time: the items of one call stay together, as in a SQLiteSession
        written = session._run_all(batch, follow=True)
        # an item as given only where the redactors changed nothing: else what the log holds, as a new store reads it
        own = {entry.id: (data, blob) for entry, (data, blob, message) in zip(written, planned)
               if (entry.message == message if message is not None else entry.data == data)}  # type: ignore[attr-defined]
        if not self._extend(session, session.leaf_id, own=own):
            self._leaf = _UNREAD  # read again at the next call

    def _plan(self, items: Iterable[Any]) -> list[tuple[Any, bytes, Message | None]]:
        """Each item as the JSON value to record, its JSON text and its message (None: a custom entry), or
        ``SessionError('invalid_entry')`` for the first that the log cannot hold, before anything is written."""
        now = time.time_ns() // 1_000_000
        names = dict(self._tool_names)  # the items' own entries note them once written (_extend)
        planned = []
        for item in items:
            data = json_value("item", item)
            try:
                blob = _encode(data)
            except UnicodeEncodeError as exc:
                raise SessionError("invalid_entry", f"item: {exc}") from None
            planned.append((data, blob, to_message(data, names, now)))
            _note_tool_name(names, data)
        return planned

    def _pop_item(self) -> Any:
        for _ in range(20):
            session = self._read()
            if not self._entries:
                return None
            try:  # only if nobody appended since the read: else the item popped would not be the latest
                session.move_to(self._entries[-1].parent_id, if_version=session.version)
            except SessionError as exc:
                if exc.code != "conflict":
                    raise
                continue
            self._entries.pop()
            blob = self._blobs.pop()
            self._leaf = session.leaf_id
            return _decode(blob)
        raise SessionError("conflict", f"session {self.session_id}: other writers kept appending; nothing was popped")

    def _clear_session(self) -> None:
        session = self._read()
        if self._entries:
            session.move_to(None)
        self._entries, self._blobs, self._leaf = [], [], session.leaf_id


_NOT_AN_ITEM = object()


def _item_of(entry: Entry) -> Any:
    """The item an entry holds, or ``_NOT_AN_ITEM`` (labels, names, entries written by other programs)."""
    if isinstance(entry, CustomEntryAppended):
        return entry.data if entry.custom_type == CUSTOM_TYPE else _NOT_AN_ITEM
    if not isinstance(entry, MessageAppended) or KEY not in getattr(entry.message, "extra", ()):
        return _NOT_AN_ITEM
    try:
        return to_item(entry.message)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise SessionError("invalid_entry", f"entry {entry.id} is not an Agents SDK item ({exc!r})") from exc


_WHOLE = "openai_agents.whole"  # marks the stand-in message of a call or output item kept whole in a custom entry


def _pairing_view(entry: Entry) -> Entry:
    """The entry as the tool-call rule sees it: a function call or output kept whole in a custom entry (its content
    did not map to a message) stands as the message it would be, so the rule pairs it too."""
    if not isinstance(entry, CustomEntryAppended) or not isinstance(entry.data, dict):
        return entry
    data = entry.data
    kind, call_id = data.get("type"), data.get("call_id")
    if not isinstance(call_id, str) or kind not in ("function_call", "function_call_output"):
        return entry
    raw_name = data.get("name")
    name = raw_name if isinstance(raw_name, str) else ""
    extra = {_WHOLE: data}
    message: Message = (AssistantMessage([ToolCall(id=call_id, name=name)], extra=extra) if kind == "function_call"
                        else ToolResultMessage(tool_call_id=call_id, tool_name=name, extra=extra))
    return MessageAppended(originator_id=entry.originator_id, originator_version=entry.originator_version,
                           timestamp=entry.timestamp, id=entry.id, parent_id=entry.parent_id, message=message)


def _repaired_item(entry: MessageAppended) -> Any:
    """The item of an entry the repair made: an error output for a call that had none, or an item whose call id it
    renamed (a repeated id)."""
    message: Any = entry.message  # a message the store or the repair made: user, assistant or tool result
    whole = message.extra.get(_WHOLE)
    if whole is not None:
        calls = [b.id for b in message.content if isinstance(b, ToolCall)] if isinstance(message, AssistantMessage) else []
        return {**whole, "call_id": calls[0] if calls else message.tool_call_id}
    if tool_pairs.is_synthetic(message) and KEY not in message.extra:
        return {"type": "function_call_output", "call_id": message.tool_call_id, "output": tool_pairs.SYNTHETIC_TEXT}
    return to_item(message)


def _note_tool_name(names: dict[str, str], item: Any) -> None:
    if isinstance(item, dict) and item.get("type") == "function_call":
        call_id, name = item.get("call_id"), item.get("name")
        if isinstance(call_id, str) and isinstance(name, str):
            names[call_id] = name


__all__ = ["SessionTreeSession"]
