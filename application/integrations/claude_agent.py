"""The Claude Agent SDK's ``SessionStore`` on sessiontree sessions (docs/integrations.md, "Claude Agent SDK").

``SessionTreeSessionStore(repo=...)`` mirrors Claude Code transcripts: each ``SessionKey`` (project key, session id,
subpath) is one session, ``cc.<project>.<session>[.<subpath>]`` (claude_code_entries.py), whose header metadata holds
the key. Each transcript line is an entry (a message where the line is one, claude_code_entries.py); a line with a
``uuid`` is the entry with that id, under the entry of its ``parentUuid``, so the transcript's tree is the session's tree.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import closing
from datetime import datetime
from typing import Any, TypeVar

import msgspec

try:
    from claude_agent_sdk import SessionStore, fold_session_summary
    from claude_agent_sdk.types import (
        SessionKey,
        SessionListSubkeysKey,
        SessionStoreEntry,
        SessionStoreListEntry,
        SessionSummaryEntry,
    )
except ModuleNotFoundError as exc:  # the extra is not installed: say which one
    raise ModuleNotFoundError(
        "missing_extra: sessiontree.integrations.claude_agent needs claude-agent-sdk: pip install 'sessiontree[claude-agent]'",
        name=exc.name,
    ) from exc

from sessiontree.domain.errors import SessionError
from sessiontree.domain.values import json_value
from sessiontree.integrations import claude_code_entries as lines
from sessiontree.integrations._held import HeldSessions
from sessiontree.session import Session

__all__ = ["SessionTreeSessionStore"]

T = TypeVar("T")
_encode = msgspec.json.encode
_decode = msgspec.json.decode
RETRIES = 5  # appends redone after another writer moved the log under this one (each takes the log in first)


class SessionTreeSessionStore(HeldSessions, SessionStore):
    """Claude Code transcripts as sessiontree sessions in ``repo`` (a repository, or a URL for ``open_repo``).

    Every optional method is implemented. Calls on one key run one at a time (an ``asyncio.Lock`` per key and event
    loop). Up to 32 sessions stay open between calls (``Held``), refreshed before each with what other writers, in any
    process, appended; a call on one held runs inline on files and memory, any other call in a worker thread. ``cwd``
    is the working directory a new session records when its lines name none.
    """

    def __repr__(self) -> str:
        return f"SessionTreeSessionStore(repo={self.repo!r})"

    def close(self) -> None:
        """Close the sessions it holds open, and the repository if the store opened it (from a URL); a repository passed
        in is left to its owner."""
        self._close_held()

    async def _one(self, key: Any, function: Callable[..., T], *args: Any) -> T:
        checked = lines.check_key(key)
        sid = lines.session_id_for(checked)
        async with self._lock_for(sid):
            return await self._held.call(sid, function, checked, sid, *args)

    # -- claude_agent_sdk.SessionStore ------------------------------------------------------------------------------

    async def append(self, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        """Append the lines; one whose ``uuid`` the session holds already is skipped (a retried batch writes nothing
        twice). Every line is checked (a JSON object) before any is written."""
        await self._one(key, self._append, entries)

    async def load(self, key: SessionKey) -> list[SessionStoreEntry] | None:
        """Every line appended, in append order (deep-equal to what was appended); None for a key never written."""
        return await self._one(key, self._load)

    async def list_sessions(self, project_key: str) -> list[SessionStoreListEntry]:
        """The project's main transcripts, ``mtime`` the time of the session's last write (epoch ms)."""
        return await self._held.call(None, self._list_sessions, project_key)  # type: ignore[arg-type]  # TypedDict rows

    async def list_session_summaries(self, project_key: str) -> list[SessionSummaryEntry]:
        """The SDK's summary of each main transcript (``fold_session_summary`` over its lines), ``mtime`` as
        :meth:`list_sessions` gives it."""
        return await self._held.call(None, self._summaries, project_key)

    async def delete(self, key: SessionKey) -> None:
        """Delete the transcript's session; a main transcript takes its subagent transcripts with it."""
        await self._one(key, self._delete)

    async def list_subkeys(self, key: SessionListSubkeysKey) -> list[str]:
        """The subpaths of the session's subagent transcripts."""
        checked = lines.check_key({"project_key": key["project_key"], "session_id": key["session_id"]})
        return await self._held.call(None, self._subkeys, checked)

    # -- the blocking half -------------------------------------------------------------------------------------------

    def _lines(self, sid: str, work: Callable[[Session], Any] | None = None) -> list[bytes] | None:
        """The session's lines as JSON texts, after ``work(session)`` if given (None: no such session). The session stays
        open between calls (``Held``), with the texts of the lines read so far, so a call decodes only new entries."""
        taken = self._held.take(sid)
        if taken is None:
            return None
        session, memo = taken
        try:
            if work is not None:
                work(session)
            entries = session.get_entries()
            if memo.get("seen", 0) > len(entries):
                memo.clear()
            texts = memo.setdefault("texts", [])
            for entry in entries[memo.get("seen", 0) :]:
                line = lines.line_of(entry)
                if line is not lines.NOT_A_LINE:
                    texts.append(_encode(line))
            memo["seen"] = len(entries)
        except BaseException:
            session.close()
            raise
        self._held.give(sid, session, memo)
        return list(texts)

    def _append(self, key: dict[str, str], sid: str, entries: list[Any]) -> None:
        checked = _checked(entries)
        if not checked:
            return
        done = [0]  # how many lines are written (or skipped): a retry goes on from there
        for attempt in range(RETRIES + 1):
            try:
                if self._lines(sid, lambda session: lines.append_lines(session, checked, done)) is None:
                    self._create(key, sid, checked).close()
                    continue
                return
            except SessionError as exc:
                if exc.code != "conflict" or attempt == RETRIES:
                    raise
            # another writer moved the log in a way this one cannot follow: nothing of the failed save was written
        raise SessionError("conflict", f"session {sid} kept changing under this store")

    def _create(self, key: dict[str, str], sid: str, entries: list[dict[str, Any]]) -> Session:
        cwd = next((line["cwd"] for line in entries if isinstance(line.get("cwd"), str)), self.cwd)  # Claude Code's
        try:
            return self.repo.create(cwd, metadata={lines.KEY: key}, session_id=sid)
        except SessionError as exc:
            if exc.code != "already_exists":
                raise
            return self.repo.open(sid)

    def _load(self, key: dict[str, str], sid: str) -> list[Any] | None:
        texts = self._lines(sid)
        return None if texts is None else _decode(b"[" + b",".join(texts) + b"]")

    def _infos(self, project_key: str) -> list[tuple[Any, list[str | None]]]:
        """The listing rows of the project's sessions, with their decoded key parts."""
        prefix = lines.project_prefix(project_key)
        found = []
        for info in self.repo.list():
            parts = lines.split_id(info.id) if info.id.startswith(prefix) else None
            if parts is not None:
                found.append((info, parts))
        return found

    def _key_of(self, sid: str) -> dict[str, str] | None:
        """The key a session's header records (for an id whose parts are digests)."""
        session = self._open(sid)
        if session is None:
            return None
        with closing(session):
            key = session.header.metadata.get(lines.KEY)
        return dict(key) if isinstance(key, Mapping) else None

    def _main_sessions(self, project_key: str) -> list[tuple[str, str, int]]:
        """(session id, Claude session id, mtime) of each main transcript of the project."""
        found = []
        for info, parts in self._infos(project_key):
            if len(parts) != 2:
                continue
            claude_id = parts[1]
            if claude_id is None or parts[0] is None:
                key = self._key_of(info.id)
                if key is None or key.get("project_key") != project_key or "subpath" in key:
                    continue
                claude_id = key["session_id"]
            elif parts[0] != project_key:
                continue
            found.append((info.id, claude_id, _ms(info.modified)))
        return found

    def _list_sessions(self, project_key: str) -> list[dict[str, Any]]:
        return [{"session_id": claude_id, "mtime": mtime} for _, claude_id, mtime in self._main_sessions(project_key)]

    def _summaries(self, project_key: str) -> list[Any]:
        out = []
        for sid, claude_id, mtime in self._main_sessions(project_key):
            texts = self._lines(sid)
            if texts is None:
                continue  # deleted since it was listed
            entries = _decode(b"[" + b",".join(texts) + b"]")
            key = {"project_key": project_key, "session_id": claude_id}
            summary = fold_session_summary(None, key, entries)  # type: ignore[arg-type]
            summary["mtime"] = mtime  # the storage clock list_sessions uses, as the SDK asks
            out.append(summary)
        return out

    def _subs(self, key: dict[str, str]) -> list[tuple[str, str]]:
        """(session id, subpath) of each subagent transcript under the key's session."""
        prefix = lines.session_id_for(key) + "."
        found = []
        for info, parts in self._infos(key["project_key"]):
            if len(parts) != 3 or not info.id.startswith(prefix):
                continue
            subpath = parts[2]
            if subpath is None or None in parts[:2]:
                held = self._key_of(info.id)
                if held is None or held.get("session_id") != key["session_id"] or held.get("project_key") != key["project_key"]:
                    continue
                subpath = held.get("subpath")
            if subpath:
                found.append((info.id, subpath))
        return found

    def _subkeys(self, key: dict[str, str]) -> list[str]:
        return [subpath for _, subpath in self._subs(key)]

    def _delete(self, key: dict[str, str], sid: str) -> None:
        if "subpath" not in key:
            for sub_id, _ in self._subs(key):
                self._held.forget(sub_id)
                self.repo.delete(sub_id)
        self._held.forget(sid)
        self.repo.delete(sid)


def _checked(entries: Any) -> list[dict[str, Any]]:
    if not isinstance(entries, list):
        raise TypeError(f"entries must be a list of transcript lines, not {entries!r:.80}")
    checked = []
    for n, entry in enumerate(entries):
        value = json_value(f"entries[{n}]", entry)
        if not isinstance(value, dict):
            raise SessionError("invalid_entry", f"entries[{n}] is not a JSON object: {entry!r:.80}")
        checked.append(value)
    return checked


def _ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso).timestamp() * 1000)
