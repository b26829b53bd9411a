"""The live Session: the SPEC section 7 API over an aggregate, its projections and a storage.

An append runs a command of the aggregate (which checks the invariants and returns the event), saves the event through
the storage, then folds it into the aggregate and the projections computed so far (the kept context takes it in at its
next read). Nothing is folded before it is saved, so a refused or failed append leaves no trace anywhere.

Any number of Session objects, in any processes, append to one session. When others appended since this object last
read, the storage hands their entries over at write time: they are folded in (the tree, labels, names and stats see
them) and this object's event is numbered after them, still under this object's own leaf (docs/repositories.md,
*Writers*). ``if_version=`` asks for the opposite, optimistic concurrency: ``conflict`` unless the log is still at the
version the caller read. An append retried with the id it was given is answered without writing twice. ``repair``
appends the results a trailing turn's tool calls lack (docs/concepts.md, *Tool calls and results*).
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import attrs

from sessiontree import compaction as _compaction
from sessiontree.compaction import branch_summary_fields
from sessiontree.domain import aggregate as commands
from sessiontree.domain.aggregate import leaf_at
from sessiontree.domain.erasure import RECORD_TYPE
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import Entry
from sessiontree.domain.ids import Clock, IdGenerator, RandomIds, UtcTimestamps, checked_ids, now_iso
from sessiontree.domain.messages import Usage
from sessiontree.projections.base import Projection, subscribed_types
from sessiontree.projections.compaction import DEFAULT_KEEP_RECENT_TOKENS, TokenEstimator
from sessiontree.projections.context import Built, ContextProjection, SessionContextBuildOptions
from sessiontree.projections.tool_pairs import find_problems, synthetic_result, trailing_missing
from sessiontree.reader import BUILTINS, SessionReader, check_id
from sessiontree.storage.pipeline import DEFAULT, Redaction
from sessiontree.storage.storage import SessionStorage, moved

# An append command bound to its arguments: (aggregate, entry id, timestamp) -> the event.
Command = Callable[[commands.SessionAggregate, str, str], Entry]


class _IdTaken(Exception):  # another writer's entry, taken in at write time, holds the id of one being appended
    pass


class ContextRepairWarning(UserWarning):
    """``Session.repair`` left problems it cannot fix by appending; ``repair_tool_pairs`` repairs them in the context."""


def repeated(session: Session, entry_id: str, command: Command) -> str:
    """An append with an ``entry_id`` the session holds: the same append again is answered with that id and writes
    nothing (a safe retry); anything else is ``already_exists``. The probe is redacted as the first append was."""
    probe = session._redaction.redact(command(session._agg, "\x00probe", session._now()))
    held = session.entry(entry_id)
    same = attrs.evolve(probe, id=held.id, parent_id=held.parent_id, timestamp=held.timestamp,
                        originator_version=held.originator_version)
    encode = session.storage.codec.encode_event  # the same append writes the same line (a tuple reads back as a list)
    if same != held and encode(same) != encode(held):
        raise SessionError("already_exists", f"entry {entry_id!r} already exists in session {session.id} and is not this append")
    return entry_id


def fresh_id(session: Session, taken: Collection[str] = ()) -> str:
    """A new entry id (none of ``taken`` either), generated again on a collision (SPEC 2.2)."""
    for _ in range(100):
        candidate: str = session._new_id()
        if candidate not in session._agg and candidate not in taken:
            return candidate
    raise SessionError("invalid_entry", "the id generator kept returning ids already in use")


def check_if_version(if_version: Any) -> int | None:
    if if_version is not None and (isinstance(if_version, bool) or not isinstance(if_version, int) or if_version < 1):
        raise TypeError(f"if_version must be a session version (an int >= 1, Session.version) or None, not {if_version!r}")
    return if_version


class Session(SessionReader):
    """A live session: every query of :class:`SessionReader`, plus the append commands.

    ``Session(storage)`` replays the storage's log. ``clock`` and ``id_generator`` are injectable (deterministic tests);
    ``redactors`` run over every string of an entry before it is saved (default: a
    :class:`~sessiontree.content.redaction.SecretRedactor`; None turns redaction off; docs/audit.md); ``options`` (or
    ``context_build_options=``, the seed's name) are session-level context options that every ``build_context`` call
    merges with its own; ``projections`` are app projections (see :meth:`register_projection`). A Session may be shared
    by threads: each append (the command and its save) and each cache a read fills runs under one lock.
    """

    def __init__(
        self, storage: SessionStorage, options: SessionContextBuildOptions | None = None, *, clock: Clock | None = None,
        id_generator: IdGenerator | None = None, projections: Sequence[Projection[Any]] = (),
        context_build_options: SessionContextBuildOptions | None = None, redactors: Any = DEFAULT,
    ) -> None:
        if context_build_options is not None and options is not None:
            raise TypeError("pass options or context_build_options (the seed's name for it), not both")
        options = options if context_build_options is None else context_build_options
        if not isinstance(storage, SessionStorage):
            raise TypeError(f"storage must be a SessionStorage, not {storage!r}")
        if options is not None and not isinstance(options, SessionContextBuildOptions):
            raise TypeError(f"options must be SessionContextBuildOptions or None, not {options!r}")
        if clock is not None and not callable(clock):
            raise TypeError(f"clock must be a callable returning an aware datetime, not {clock!r}")
        if id_generator is not None and not callable(id_generator):
            raise TypeError(f"id_generator must be a callable returning str ids, not {id_generator!r}")
        header, log = storage.load()
        aggregate = commands.replay(header, log)
        base = getattr(storage, "context_options", None) or SessionContextBuildOptions()  # a format's own rules (pi)
        super().__init__(aggregate, len(log), base.merged(options), {})
        self._storage = storage
        self._now: Callable[[], str] = UtcTimestamps() if clock is None else (lambda: now_iso(clock))
        self._new_id = RandomIds() if id_generator is None else checked_ids(id_generator)
        self._context = ContextProjection(self._options)
        self._kept: Built | None = None
        self._unseen: list[Entry] = []  # saved since the kept context was read
        self._lock = threading.RLock()
        # the first step of each of its appends (storage/pipeline.py): its own, as another Session over this storage may
        # have others; the storage's too, for an app appending to it directly
        self._redaction = storage.pipeline.redaction = Redaction(redactors)
        for projection in projections:
            self.register_projection(projection)

    def __repr__(self) -> str:
        return f"<Session {self.id} at {self._storage.location}, version {self.version}>"

    @property
    def storage(self) -> SessionStorage:
        return self._storage

    @property
    def redactors(self) -> tuple[Callable[[str], str], ...]:
        """The redactors each of its appended entries goes through (``()``: none): the first step of the pipeline."""
        return self._redaction.redactors

    @property
    def leaf_id(self) -> str | None:
        """This object's leaf: where its next entry hangs. Entries other writers append do not move it."""
        return self._agg.leaf_id

    @property
    def log_leaf_id(self) -> str | None:
        """The log's leaf as far as this object has read: the last append's, by any writer (what a fresh open starts
        from). ``refresh(follow=True)`` reads on and moves this object's leaf there."""
        return leaf_at(self._agg.log, self._limit)

    def close(self) -> None:
        self._storage.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def register_projection(self, projection: Projection[Any]) -> None:
        """Add an app projection: replayed lazily, updated on append, in every time-travel view."""
        if not isinstance(projection, Projection):
            raise TypeError(f"{projection!r} is not a projection (needs name, initial, apply)")
        name = projection.name
        if not isinstance(name, str) or not name:
            raise TypeError(f"projection name must be a non-empty str, not {name!r}")
        if name in self._projections or name in BUILTINS:
            raise SessionError("already_exists", f"a projection named {name!r} is already registered")
        self._projections[name] = projection

    def projection(self, name: str) -> Any:
        self._caught_up()
        with self._lock:
            return super().projection(name)

    # Reads of the whole log (these, and every projection) take in what other writers appended first, where that is cheap
    # (``_caught_up``). Reads of this object's branch (the context, get_branch) need not: another writer's is never on it.
    def get_entries(self) -> list[Entry]:
        self._caught_up()
        return super().get_entries()

    def iter_heads(self) -> Any:
        self._caught_up()
        return super().iter_heads()

    def find_entries(self, entry_type: str) -> list[Entry]:
        self._caught_up()
        return super().find_entries(entry_type)

    def get_children(self, entry_id: str | None) -> list[Entry]:
        self._caught_up()
        return super().get_children(entry_id)

    def _current_context(self) -> Built:
        """The kept context, extended first with the entries saved since it was last read."""
        with self._lock:
            kept = self._kept
            for event in self._unseen:
                if kept is None:
                    break
                kept = self._context.apply(kept, event)
            self._unseen.clear()
            if kept is None or kept.leaf_id != self.leaf_id:
                kept = super()._current_context()
            self._kept = kept
            return kept

    def get_session_stats(self) -> Any:
        self._caught_up()
        with self._lock:
            return super().get_session_stats()

    def _fold(self, events: Sequence[Entry], foreign: bool = False) -> None:
        """Fold saved events into the aggregate, and advance what was computed from the log. ``foreign``: other writers'
        entries; this object's leaf and kept context stay (another writer's entry is never on this branch)."""
        agg, fold = self._agg, commands.take_in if foreign else commands.project
        for event in events:
            fold(agg, event)
            if self._kept is not None and not foreign:
                self._unseen.append(event)
            if self._states:
                self._advance(event)
        self._limit = agg.version - 1

    def _advance(self, entry: Entry) -> None:
        """Feed a saved entry to every projection computed so far. It is durable already, so an app projection whose
        ``apply`` raises must not make the append look failed (a retry would duplicate it): its state is dropped and the
        next read replays the log, raising there."""
        for name, state in list(self._states.items()):
            projection = self._projections.get(name) or BUILTINS[name]
            wanted = subscribed_types(projection)
            if wanted is None or entry.type in wanted:
                try:
                    self._states[name] = projection.apply(state, entry)
                except Exception:
                    if name in BUILTINS:
                        raise
                    del self._states[name]

    def _run(self, command: Command, entry_id: str | None, *, if_version: int | None = None, follow: bool = False) -> str:
        """Run an append command (``command(aggregate, id, timestamp)``), save its event, fold it in; returns the id.
        ``follow``: the entry hangs under the log's leaf at write time, not this object's."""
        check_if_version(if_version)
        with self._lock:
            if entry_id is not None and not check_id("entry_id", entry_id):
                raise SessionError("invalid_entry", "entry_id must not be empty")
            if if_version is not None and if_version > self._agg.version:  # the caller read further than this object
                self._fold(self._storage.entries_after(self._agg.version), foreign=True)
            if entry_id is not None and entry_id in self._agg:
                return repeated(self, entry_id, command)
            if if_version is not None and if_version != self._agg.version:
                raise moved(self.id, if_version, self._agg.version)
            if follow:
                self._agg.leaf_id = self.log_leaf_id
            for _ in range(3):
                if entry_id is None:
                    new_id = self._new_id()
                    try:
                        event = command(self._agg, new_id, self._now())
                    except SessionError as exc:  # an id in use is drawn again (SPEC 2.2)
                        if exc.code != "already_exists" or new_id not in self._agg:
                            raise
                        event = command(self._agg, fresh_id(self), self._now())
                else:
                    event = command(self._agg, entry_id, self._now())
                try:
                    return self._save((event,), if_version, follow)[-1].id
                except _IdTaken:  # another writer's entry has this id: a retry that landed, or a new id is drawn
                    self._refresh_quietly()
                    if entry_id is not None and entry_id in self._agg:
                        return repeated(self, entry_id, command)
                except SessionError as exc:
                    # A retry whose earlier attempt landed (its acknowledgement lost): take the log in, answer as before.
                    if entry_id is None or exc.code != "conflict" or not self._refresh_quietly() or entry_id not in self._agg:
                        raise
                    return repeated(self, entry_id, command)
            raise SessionError("conflict", f"session {self.id}: other writers kept taking the ids drawn; nothing was written")

    def _run_all(self, batch: Sequence[Command], *, follow: bool = False) -> list[Entry]:
        """Run several append commands as one write: each entry under the one before, the first under this object's
        leaf (``follow``: the log's leaf at write time), saved together, so no other writer's entry comes between them.
        Returns the entries as written (redacted)."""
        with self._lock:
            if follow:
                self._agg.leaf_id = self.log_leaf_id
            agg = self._agg
            events: list[Entry] = []
            for command in batch:
                event = command(agg, fresh_id(self, {e.id for e in events}), self._now())
                parent = events[-1].id if events else agg.leaf_id
                events.append(attrs.evolve(event, originator_version=agg.version + 1 + len(events), parent_id=parent))
            if not events:
                return []
            return self._save(events, None, follow, drawn="append")

    def _save(self, events: Sequence[Entry], if_version: int | None = None, follow: bool = False, drawn: str = "") -> list[Entry]:
        """Save ``events`` and fold them in, after the entries other writers appended meanwhile (numbered after those at
        write time, and folded in first). ``drawn`` (``append``, ``move``): an id another writer took is a ``conflict``."""
        def rebase(events: Sequence[Entry], foreign: list[str], log_leaf: str | None) -> list[Entry]:  # under the
            # storage's lock: renumber only (``events`` as the storage writes them: redacted)
            if not {event.id for event in events}.isdisjoint(foreign):
                raise _IdTaken
            first = self._agg.version + len(foreign) + 1
            out = [attrs.evolve(event, originator_version=first + i) for i, event in enumerate(events)]
            if follow and out:
                out[0] = attrs.evolve(out[0], parent_id=log_leaf)
            return out

        try:
            taken, written = self._storage.append(events, rebase, if_version=if_version, redaction=self._redaction)
        except _IdTaken:
            if not drawn:
                raise
            self._refresh_quietly()
            raise SessionError("conflict", f"session {self.id}: another writer appended an entry with an id this {drawn} "
                               "drew; nothing was written, retry") from None
        if taken:
            self._fold(taken, foreign=True)
        self._fold(written)
        return written

    def _refresh_quietly(self) -> int:
        try:
            return self.refresh()
        except SessionError:
            return 0

    def _caught_up(self) -> None:
        """Before a read of the whole log: take in what other writers appended, where the storage tells it cheaply
        (a JSONL file's size); elsewhere a read answers as of this object's last append or refresh."""
        grew = getattr(self._storage, "grew", None)
        if grew is not None and grew():
            with self._lock:
                try:
                    self._fold(self._storage.entries_after(self._agg.version), foreign=True)
                except SessionError:  # a damaged or replaced file: the read answers as it would have; an append or
                    pass  # refresh() reports it

    def refresh(self, *, follow: bool = False) -> int:
        """Take in the entries other writers appended since this session read its log; returns how many. This object's
        leaf stays where it was, unless ``follow=True`` moves it to the log's leaf (the last append's, by anyone).
        ``conflict`` if the log changed under it in another way (shorter, its file replaced, or a line erased since it was
        read, on every backend): open the session again, since this object holds what the log no longer does."""
        with self._lock:
            new = self._storage.entries_after(self._agg.version)
            self._fold(new, foreign=True)
            if follow:
                self._agg.leaf_id = self.log_leaf_id
            return len(new)

    def reload(self) -> None:
        """Read the log again (after a line was rewritten): the aggregate and every cache start afresh."""
        with self._lock:
            header, log = self._storage.load()
            self._agg, self._limit = commands.replay(header, log), len(log)
            self._kept, self._states = None, {}
            self._unseen.clear()

    def redact(self, entry_id: str, *, reason: str, by: str | None = None) -> str:
        """Erase the content of one entry and keep the log verifiable (docs/audit.md, *Erasure*); returns the id of the
        redaction record appended. ``by``: who asked (default: the OS user)."""
        from sessiontree.audit import erasure  # its blob collection and scrubbing are loaded only by a process that erases

        return erasure.redact(self, entry_id, reason, by)

    def repair(self) -> list[str]:
        """Append a synthetic error result for each call of the leaf's trailing turn that has none (an interrupted run),
        and return the ids appended. Problems further back are history: they stay in the log, ``repair`` warns
        (:class:`ContextRepairWarning`) and ``repair_tool_pairs`` repairs them in the context."""
        with self._lock:
            missing = trailing_missing(self._unrepaired_context(self.leaf_id))
            appended = [self.append_message(synthetic_result(call, assistant.timestamp)) for call, assistant in missing]
            left = find_problems(self._unrepaired_context(self.leaf_id))
        if left:
            warnings.warn(ContextRepairWarning(
                f"session {self.id}: {len(left)} problem(s) left ({', '.join(sorted({p.kind for p in left}))}) that an append "
                "cannot fix without rewriting history; build the context with SessionContextBuildOptions(entry_transforms="
                "[repair_tool_pairs]) to repair them there"), stacklevel=2)
        return appended

    def _append(self, command: Callable[..., Entry], *args: Any, entry_id: str | None, if_version: int | None,
                **fields: Any) -> str:
        """``command(aggregate, *args, id=, timestamp=, **fields)`` run, saved and folded in by :meth:`_run`."""
        return self._run(lambda agg, id, now: command(agg, *args, id=id, timestamp=now, **fields), entry_id,
                         if_version=if_version)

    def append_message(self, message: Any, *, entry_id: str | None = None, if_version: int | None = None) -> str:
        """Append a user, assistant or tool-result message; returns the entry id. ``entry_id`` chooses the id: a retry with
        the same id and message writes nothing (see docs/reliability.md, *Retrying an append*). ``if_version``: append only
        if the log is still at that version (``Session.version`` as the caller read it), else ``conflict`` and nothing is
        written (docs/concepts.md, *Optimistic concurrency*). Every append method takes both."""
        return self._append(commands.append_message, message, entry_id=entry_id, if_version=if_version)

    def append_thinking_level_change(self, level: str, *, entry_id: str | None = None, if_version: int | None = None) -> str:
        return self._append(commands.append_thinking_level_change, level, entry_id=entry_id, if_version=if_version)

    def append_model_change(
        self, provider: str, model_id: str, *, entry_id: str | None = None, if_version: int | None = None,
    ) -> str:
        return self._append(commands.append_model_change, provider, model_id, entry_id=entry_id, if_version=if_version)

    def append_active_tools_change(
        self, names: Sequence[str], *, entry_id: str | None = None, if_version: int | None = None,
    ) -> str:
        return self._append(commands.append_active_tools_change, names, entry_id=entry_id, if_version=if_version)

    def append_compaction(
        self, summary: str, first_kept_entry_id: str | None, tokens_before: int, details: Any = None, from_hook: bool = False,
        usage: Usage | None = None, retained_tail: Sequence[Any] | None = None, *, entry_id: str | None = None,
        if_version: int | None = None,
    ) -> str:
        """Record that older turns are replaced by ``summary`` (SPEC 2.2, 3)."""
        return self._append(commands.append_compaction, summary, first_kept_entry_id, tokens_before, entry_id=entry_id,
                            if_version=if_version, details=details, from_hook=from_hook, usage=usage, retained_tail=retained_tail)

    def append_custom_entry(
        self, custom_type: str, data: Any = None, *, entry_id: str | None = None, if_version: int | None = None,
    ) -> str:
        if custom_type == RECORD_TYPE:
            raise SessionError("invalid_entry", f"custom type {custom_type!r} is reserved: redact() writes its records")
        return self._append(commands.append_custom_entry, custom_type, data, entry_id=entry_id, if_version=if_version)

    def append_custom_message_entry(
        self, custom_type: str, content: Any, details: Any = None, display: bool = True, *, entry_id: str | None = None,
        if_version: int | None = None,
    ) -> str:
        return self._append(commands.append_custom_message_entry, custom_type, content, entry_id=entry_id,
                            if_version=if_version, details=details, display=display)

    def append_label_change(
        self, target_id: str, label: str | None, *, entry_id: str | None = None, if_version: int | None = None,
    ) -> str:
        return self._append(commands.append_label_change, target_id, label, entry_id=entry_id, if_version=if_version)

    def append_session_info(self, name: str | None, *, entry_id: str | None = None, if_version: int | None = None) -> str:
        return self._append(commands.append_session_info, name, entry_id=entry_id, if_version=if_version)

    def move_to(
        self, entry_id: str | None, summary: Mapping[str, Any] | None = None, *, summarize: Any = None,
        if_version: int | None = None,
    ) -> str | None:
        """Move the leaf to ``entry_id`` (None: before the first entry).

        With ``summary`` (a dict with ``"summary"`` and optionally ``"details"``, ``"usage"``, ``"from_hook"``) a branch
        summary is appended under the target and becomes the leaf; its id is returned. Both entries are saved together.
        With ``summarize`` (a summariser, docs/compaction.md) the branch being left is summarised first; ``summary`` and
        ``summarize`` are mutually exclusive. ``if_version``: only if the log is still at that version (else ``conflict``).
        """
        if summarize is not None:
            if summary is not None:
                raise TypeError("move_to takes summary= or summarize=, not both")
            return _compaction.move_summarized(self, entry_id, summarize, if_version)
        self._storage.check_writable()
        checked = branch_summary_fields(summary) if summary is not None else None
        if_version = check_if_version(if_version)
        with self._lock:
            if if_version is not None and if_version > self._agg.version:
                self._fold(self._storage.entries_after(self._agg.version), foreign=True)
            if if_version is not None and if_version != self._agg.version:
                raise moved(self.id, if_version, self._agg.version)
            moved_id, moved_at = fresh_id(self), self._now()
            summary_id, summary_at = (fresh_id(self, (moved_id,)), self._now()) if checked is not None else ("", "")
            events = self._save(commands.move_to(self._agg, entry_id, id=moved_id, timestamp=moved_at, summary=checked,
                                                 summary_id=summary_id, summary_timestamp=summary_at), if_version, drawn="move")
            return events[1].id if len(events) > 1 else None

    def append_branch_summary(
        self, from_id: str | None, summary: str, details: Any = None, from_hook: bool = False, usage: Any = None, *,
        if_version: int | None = None,
    ) -> str:
        """A branch summary under ``from_id``, which becomes the leaf; its id. The seed's earlier ``appendBranchSummary``
        (pi's ``branchWithSummary``): the same as ``move_to(from_id, {"summary": summary, ...})``, which records the leaf
        move too (docs/porting.md)."""
        fields: dict[str, Any] = {"summary": summary, "details": details, "from_hook": from_hook}
        if usage is not None:
            fields["usage"] = usage
        summary_id = self.move_to(from_id, fields, if_version=if_version)
        assert summary_id is not None  # a move with a summary always appends one
        return summary_id

    async def amove_to(self, entry_id: str | None, summarize: Any, *, if_version: int | None = None) -> str | None:
        """:meth:`move_to` with ``summarize=`` an async (or plain) summariser."""
        return await _compaction.amove_summarized(self, entry_id, summarize, if_version)

    def compact(
        self, summarize: Any, keep_recent_tokens: int = DEFAULT_KEEP_RECENT_TOKENS, retain_tail: bool = False,
        details: Any = None, from_hook: bool = False, *, estimator: TokenEstimator | None = None,
        if_version: int | None = None,
    ) -> str | None:
        """Append a compaction summarising the older turns (``summarize``): its id, or None when there is nothing to
        summarise. ``if_version``: only if the log is still at that version when the compaction is written."""
        return _compaction.compact(self, summarize, keep_recent_tokens, retain_tail, details, from_hook, estimator,
                                   if_version=if_version)

    async def acompact(
        self, summarize: Any, keep_recent_tokens: int = DEFAULT_KEEP_RECENT_TOKENS, retain_tail: bool = False,
        details: Any = None, from_hook: bool = False, *, estimator: TokenEstimator | None = None,
        if_version: int | None = None,
    ) -> str | None:
        """:meth:`compact` with an async (or plain) summariser."""
        return await _compaction.acompact(self, summarize, keep_recent_tokens, retain_tail, details, from_hook, estimator,
                                          if_version=if_version)
