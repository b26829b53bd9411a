"""The live Session: the SPEC section 7 API over an aggregate, its projections and a storage.

``Session`` adds the append commands to every query of :class:`~sessiontree.reader.SessionReader`:
commands run on the aggregate, the events are saved through the storage (undone if the save
fails), then every projection computed so far and the cached context are advanced.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
import threading
from typing import Any

import attrs

from sessiontree import compaction as _compaction
from sessiontree.adapters.storage import SessionStorage
from sessiontree.domain.aggregate import SessionAggregate
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import Entry
from sessiontree.domain.gcpause import settle
from sessiontree.domain.ids import Clock, IdGenerator, new_entry_id, now_iso, utc_now
from sessiontree.domain.messages import AssistantMessage, Cost, Usage
from sessiontree.projections.base import Projection, subscribed_types
from sessiontree.projections.compaction import DEFAULT_KEEP_RECENT_TOKENS
from sessiontree.projections.context import DEFAULT_OPTIONS, SessionContextBuildOptions, entry_to_messages
from sessiontree.projections.tokens import TokenEstimator
from sessiontree.reader import (  # noqa: F401 - re-exported
    _BUILTINS,
    _check_id,
    ReplayStep,
    SessionReader,
    SessionView,
    TreeNode,
    _ContextCache,
)


class Session(SessionReader):
    """A live session: every query of :class:`SessionReader`, plus the append commands.

    ``Session(storage)`` replays the storage's log. ``clock`` and ``id_generator`` are
    injectable (deterministic tests); ``options`` are session-level context options that
    every ``build_context`` call merges with its own; ``projections`` are app projections
    (see :meth:`register_projection`).
    """

    def __init__(
        self,
        storage: SessionStorage,
        options: SessionContextBuildOptions | None = None,
        *,
        clock: Clock | None = None,
        id_generator: IdGenerator | None = None,
        projections: Sequence[Projection[Any]] = (),
    ) -> None:
        if not isinstance(storage, SessionStorage):
            raise TypeError(f"storage must be a SessionStorage, not {storage!r}")
        if options is not None and not isinstance(options, SessionContextBuildOptions):
            raise TypeError(f"options must be SessionContextBuildOptions or None, not {options!r}")
        header, entries = storage.load()
        aggregate = SessionAggregate.replay(header, entries)
        # A storage may bring context rules of its format (pi files: context_edit entries).
        base = getattr(storage, "context_options", None) or DEFAULT_OPTIONS
        super().__init__(aggregate, len(aggregate.log), base.merged(options), {})
        self._storage = storage
        if clock is not None and not callable(clock):
            raise TypeError(f"clock must be a callable returning an aware datetime, not {clock!r}")
        if id_generator is not None and not callable(id_generator):
            raise TypeError(f"id_generator must be a callable returning str ids, not {id_generator!r}")
        self._clock = clock or utc_now
        self._new_id = id_generator or new_entry_id
        self._context: _ContextCache | None = None
        # One lock around each command and its save, and around the caches reads fill:
        # a Session may be shared by threads (docs/concepts.md).
        self._lock = threading.RLock()
        for projection in projections:
            self.register_projection(projection)

    def __repr__(self) -> str:
        return f"<Session {self.id} at {self._storage.location}, version {self.version}>"

    @property
    def storage(self) -> SessionStorage:
        return self._storage

    @property
    def leaf_id(self) -> str | None:
        return self._agg.leaf_id

    def close(self) -> None:
        self._storage.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- app projections --------------------------------------------------------------

    def register_projection(self, projection: Projection[Any]) -> None:
        """Add an app projection: replayed now (lazily), updated on append, and present in
        every time-travel view, exactly like the built-ins."""
        if not isinstance(projection, Projection):
            raise TypeError(f"{projection!r} is not a projection (needs name, initial, apply)")
        name = projection.name
        if not isinstance(name, str) or not name:
            raise TypeError(f"projection name must be a non-empty str, not {name!r}")
        if name in self._projections or name in _BUILTINS:
            raise SessionError("already_exists", f"a projection named {name!r} is already registered")
        self._projections[name] = projection

    # -- writing ----------------------------------------------------------------------

    def _stamp(self) -> dict[str, str]:
        return {"id": self._agg.new_entry_id(self._new_id), "timestamp": now_iso(self._clock)}

    def _commit(self) -> None:
        agg = self._agg
        events = agg.collect_events()
        if not events:
            return
        before = events[0].originator_version - 1
        try:
            self._storage.save(events)
        except BaseException:
            agg.rollback(before)
            raise
        self._saved(events)

    def _saved(self, events: Sequence[Entry]) -> None:
        agg = self._agg
        self._limit = agg._version - agg.INITIAL_VERSION  # every entry, the new ones included
        advance = self._advance if self._states else self._advance_context  # no projection computed yet: only the context follows
        for entry in events:
            advance(entry)

    def refresh(self) -> int:
        """Take in the entries other writers appended since this session read its log;
        returns how many. ``conflict`` if the log changed under it in another way."""
        with self._lock:
            header, entries = self._storage.load()
            log = self._agg.log
            known = len(log)
            if len(entries) < known or any(entries[p].id != log.id_of(p) for p in (0, known - 1) if known):
                raise SessionError("conflict", f"session {self.id} changed under this session (reopen it)")
            new = [e if isinstance(e, Entry) else e.load() for e in entries[known:]]
            for entry in new:
                entry.apply(self._agg)
            self._agg._version += len(new)
            self._saved(new)
            return len(new)

    def _advance(self, entry: Entry) -> None:
        """Feed a saved entry to every projection computed so far.

        The entry is already durable, so an app projection whose ``apply`` raises must not
        make the append look failed (a retry would duplicate it): its state is dropped and
        the next ``projection(name)`` replays the log, raising the app's error there.
        """
        if not self._states:  # no projection computed yet: only the context follows
            self._advance_context(entry)
            return
        broken = []
        for name, state in self._states.items():
            projection = self._projections.get(name) or _BUILTINS[name]
            wanted = subscribed_types(projection)
            if wanted is None or entry.type in wanted:
                if name in self._projections:
                    try:
                        self._states[name] = projection.apply(state, entry)
                    except Exception:  # noqa: BLE001 - the app's bug surfaces on the next read
                        broken.append(name)
                else:
                    self._states[name] = projection.apply(state, entry)
        for name in broken:
            del self._states[name]
        self._advance_context(entry)

    def _run(self, command: Any, *args: Any, entry_id: str | None = None, **kwargs: Any) -> str:
        self._storage.check_writable()
        agg = self._agg
        with self._lock:
            if entry_id is not None:
                if not _check_id("entry_id", entry_id):
                    raise SessionError("invalid_entry", "entry_id must not be empty")
                if agg.has_entry(entry_id):
                    return self._repeated(entry_id, command, args, kwargs)
            try:
                new_id: str = command(*args, id=entry_id or agg.new_entry_id(self._new_id), timestamp=now_iso(self._clock), **kwargs)
            except BaseException:
                agg.rollback(self.version)
                raise
            try:
                self._commit()
            except SessionError as exc:
                # A retry whose earlier attempt did land (its acknowledgement was lost): the
                # stored line holds this id. Take the log in and answer as the first time.
                if entry_id is None or exc.code != "conflict" or not self.refresh() or not agg.has_entry(entry_id):
                    raise
                return self._repeated(entry_id, command, args, kwargs)
        return new_id

    def _repeated(self, entry_id: str, command: Any, args: Any, kwargs: Any) -> str:
        """An append with an ``entry_id`` the session holds: the same append again is answered
        with that id and writes nothing (a safe retry); anything else is ``already_exists``."""
        agg = self._agg
        version = self.version
        try:
            command(*args, id=agg.new_entry_id(self._new_id), timestamp=now_iso(self._clock), **kwargs)
            probe = agg.collect_events()[-1]
        finally:
            agg.rollback(version)
        held = self.get_entry(entry_id)
        same = attrs.evolve(
            probe, id=held.id, parent_id=held.parent_id, timestamp=held.timestamp, originator_version=held.originator_version
        )
        if same != held:
            raise SessionError(
                "already_exists", f"entry {entry_id!r} already exists in session {self.id} and is not this append"
            )
        return entry_id

    def append_message(self, message: Any, *, entry_id: str | None = None) -> str:
        """Append a user, assistant or tool-result message; returns the entry id.

        ``entry_id`` chooses the id (a retry with the same id and message writes nothing:
        see docs/reliability.md, *Retrying an append*). Every append method takes it."""
        return self._run(self._agg.append_message, message, entry_id=entry_id)

    def append_thinking_level_change(self, level: str, *, entry_id: str | None = None) -> str:
        return self._run(self._agg.append_thinking_level_change, level, entry_id=entry_id)

    def append_model_change(self, provider: str, model_id: str, *, entry_id: str | None = None) -> str:
        return self._run(self._agg.append_model_change, provider, model_id, entry_id=entry_id)

    def append_active_tools_change(self, names: Sequence[str], *, entry_id: str | None = None) -> str:
        return self._run(self._agg.append_active_tools_change, names, entry_id=entry_id)

    def append_compaction(
        self,
        summary: str,
        first_kept_entry_id: str | None,
        tokens_before: int,
        details: Any = None,
        from_hook: bool = False,
        usage: Usage | None = None,
        retained_tail: Sequence[Any] | None = None,
        *,
        entry_id: str | None = None,
    ) -> str:
        """Record that older turns are replaced by ``summary`` (SPEC 2.2, 3)."""
        return self._run(
            self._agg.append_compaction,
            summary,
            first_kept_entry_id,
            tokens_before,
            details=details,
            from_hook=from_hook,
            usage=usage,
            retained_tail=retained_tail,
            entry_id=entry_id,
        )

    def append_custom_entry(self, custom_type: str, data: Any = None, *, entry_id: str | None = None) -> str:
        return self._run(self._agg.append_custom_entry, custom_type, data, entry_id=entry_id)

    def append_custom_message_entry(
        self, custom_type: str, content: Any, details: Any = None, display: bool = True, *, entry_id: str | None = None
    ) -> str:
        return self._run(
            self._agg.append_custom_message_entry, custom_type, content, details=details, display=display, entry_id=entry_id
        )

    def append_label_change(self, target_id: str, label: str | None, *, entry_id: str | None = None) -> str:
        return self._run(self._agg.append_label_change, target_id, label, entry_id=entry_id)

    def append_session_info(self, name: str | None, *, entry_id: str | None = None) -> str:
        return self._run(self._agg.append_session_info, name, entry_id=entry_id)

    def move_to(
        self, entry_id: str | None, summary: Mapping[str, Any] | None = None, *, summarize: Any = None
    ) -> str | None:
        """Move the leaf to ``entry_id`` (None: before the first entry).

        With ``summary`` (a dict with ``"summary"`` and optionally ``"details"``,
        ``"usage"``, ``"from_hook"``) a branch summary is appended under the target and
        becomes the leaf; its id is returned. Both entries are saved together.
        With ``summarize`` (a summariser, docs/compaction.md) the branch being left is
        summarised first; ``summary`` and ``summarize`` are mutually exclusive.
        """
        if summarize is not None:
            if summary is not None:
                raise TypeError("move_to takes summary= or summarize=, not both")
            return _compaction.move_summarized(self, entry_id, summarize)
        self._storage.check_writable()
        if summary is not None:
            summary = _check_summary(summary)
        agg = self._agg
        with self._lock:
            return self._move(agg, entry_id, summary)

    def _move(self, agg: SessionAggregate, entry_id: str | None, summary: dict[str, Any] | None) -> str | None:
        try:
            agg.move_to(entry_id, **self._stamp())
            summary_id = None
            if summary is not None:
                summary_id = agg.append_branch_summary(
                    entry_id if entry_id is not None else "root",
                    summary["summary"],
                    details=summary.get("details"),
                    usage=summary.get("usage"),
                    from_hook=summary.get("from_hook", False),
                    **self._stamp(),
                )
        except BaseException:
            agg.rollback(self.version)
            raise
        self._commit()
        return summary_id

    async def amove_to(self, entry_id: str | None, summarize: Any) -> str | None:
        """:meth:`move_to` with ``summarize=`` an async (or plain) summariser."""
        return await _compaction.amove_summarized(self, entry_id, summarize)

    def compact(
        self, summarize: Any, keep_recent_tokens: int = DEFAULT_KEEP_RECENT_TOKENS, retain_tail: bool = False,
        details: Any = None, from_hook: bool = False, *, estimator: TokenEstimator | None = None,
    ) -> str | None:
        """Summarise the older turns with ``summarize`` and append the compaction entry;
        returns its id, or None when there is nothing to summarise (docs/compaction.md)."""
        return _compaction.compact(self, summarize, keep_recent_tokens, retain_tail, details, from_hook, estimator)

    async def acompact(
        self, summarize: Any, keep_recent_tokens: int = DEFAULT_KEEP_RECENT_TOKENS, retain_tail: bool = False,
        details: Any = None, from_hook: bool = False, *, estimator: TokenEstimator | None = None,
    ) -> str | None:
        """:meth:`compact` with an async (or plain) summariser."""
        return await _compaction.acompact(self, summarize, keep_recent_tokens, retain_tail, details, from_hook, estimator)

    # -- the incremental context ------------------------------------------------------

    def _cached_context(self, merged: SessionContextBuildOptions, cacheable: bool) -> _ContextCache:
        with self._lock:
            return self._kept_context(merged, cacheable)

    def projection(self, name: str) -> Any:
        with self._lock:
            return super().projection(name)

    def get_session_stats(self) -> Any:
        with self._lock:
            return super().get_session_stats()

    def _kept_context(self, merged: SessionContextBuildOptions, cacheable: bool) -> _ContextCache:
        # Transforms and projectors see the whole entry list (a projector may look past its
        # own entry), so an incrementally extended cache could differ: build afresh, unless
        # every transform declares it can be extended (``SessionContextBuildOptions.extends_with``).
        if not cacheable or not merged.cacheable:
            return self._context_parts(self.leaf_id, merged)
        cache = self._context
        if cache is None or cache.leaf_id != self.leaf_id:
            cache = self._context = self._context_parts(self.leaf_id, merged)
            # Kept for the appends to come: a large one's lists pass the young collections
            # now, not in one of those appends (domain/gcpause.py).
            settle(len(cache.entries))
        return cache

    def _advance_context(self, entry: Entry) -> None:
        cache = self._context
        if cache is None:
            return
        kind = entry.type
        if kind == "leaf":
            return  # the cache is keyed by leaf; a later lookup rebuilds if it moved
        options = self._options
        if (
            entry.parent_id != cache.leaf_id
            or kind == "compaction"
            or ((options.entry_transforms or options.entry_projectors) and not options.extends_with(entry))
        ):
            self._context = None
            return
        index = len(cache.entries)
        cache.entries.append(entry)
        if kind == "message":  # what entry_to_messages gives for a message, without the call
            cache.messages.append(entry.message)  # type: ignore[attr-defined]
        else:
            cache.messages.extend(entry_to_messages(entry, index, cache.entries, options))
        state = cache.state
        if kind == "thinking_level_change":
            state = attrs.evolve(state, thinking_level=entry.thinking_level)  # type: ignore[attr-defined]
        elif kind == "model_change":
            state = attrs.evolve(state, model={"provider": entry.provider, "model_id": entry.model_id})  # type: ignore[attr-defined]
        elif kind == "message" and isinstance(entry.message, AssistantMessage):  # type: ignore[attr-defined]
            message = entry.message  # type: ignore[attr-defined]
            model = state.model
            if model is None or model["provider"] != message.provider or model["model_id"] != message.model:
                state = attrs.evolve(state, model={"provider": message.provider, "model_id": message.model})
        elif kind == "active_tools_change":
            state = attrs.evolve(state, active_tool_names=tuple(entry.active_tool_names))  # type: ignore[attr-defined]
        cache.state = state
        cache.leaf_id = entry.id


def _check_summary(summary: Any) -> dict[str, Any]:
    if not isinstance(summary, Mapping):
        raise TypeError(f"summary must be a dict with a 'summary' key, not {summary!r}")
    unknown = set(summary) - {"summary", "details", "usage", "from_hook"}
    if unknown:
        raise SessionError("invalid_entry", f"unknown branch summary keys: {', '.join(sorted(unknown))}")
    if not isinstance(summary.get("summary"), str):
        raise SessionError("invalid_entry", f"branch summary needs a str 'summary', got {summary.get('summary')!r}")
    out = dict(summary)
    usage = out.get("usage")
    if isinstance(usage, Mapping):
        fields = dict(usage)
        cost = fields.pop("cost", None)
        try:
            out["usage"] = Usage(**fields, cost=Cost(**cost) if isinstance(cost, Mapping) else Cost())
        except TypeError as exc:
            raise SessionError("invalid_entry", f"branch summary usage is not a valid usage: {exc}") from None
    return out


__all__ = ["ReplayStep", "Session", "SessionReader", "SessionView", "TreeNode"]
