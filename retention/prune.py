"""Retention: prune whole sessions whose last change is older than a cut-off, deleting or archiving them.

``repo.prune(older_than=...)`` first computes the complete plan, every session it selects with its name, working
directory, last change, entries and size, and only then acts on it, one session at a time: archive (written whole
and fsynced) and delete. ``dry_run=True`` returns the plan and touches nothing; ``repo.apply_prune(plan)`` carries
out a plan shown earlier (the command line asks first). A session that changed since it was listed is kept. The
first failure stops the pruning: :class:`PruneError` carries what was done. See docs/repositories.md.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import attrs

from sessiontree.audit.checkpoints import SIDECAR_SUFFIX
from sessiontree.content.blob_stores import collect, digests_of, scope_of
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import format_timestamp, parse_timestamp
from sessiontree.retention import stores as store_retention
from sessiontree.retention.archive import archive_name, write_archive
from sessiontree.retention.stores import ChangedError, Survey
from sessiontree.storage import folders
from sessiontree.storage.store import SessionInfo

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_AGE = re.compile(r"(\d+)([smhdw])")


def parse_age(text: str) -> timedelta:
    """``90d``, ``12h``, ``2w``, ``30m``, ``45s`` (or several: ``1w3d``) as a timedelta; ``ValueError`` otherwise."""
    compact = text.strip().lower().replace(" ", "")
    if not compact or _AGE.sub("", compact):
        raise ValueError(f"not an age: {text!r} (use a number and a unit: 90d, 12h, 2w, 30m, 45s)")
    return timedelta(seconds=sum(int(n) * _UNITS[unit] for n, unit in _AGE.findall(compact)))


@attrs.frozen
class PrunedSession:
    """One session a pruning selects: what a user needs to recognise it, and where its archive goes."""

    id: str
    name: str | None
    cwd: str
    modified: str  # its last change (ISO 8601)
    entries: int
    bytes: int | None  # its log's size (a file's size; a database's stored lines)
    location: str
    archive: str | None = None  # the archive file (to be) written, with archive=DIR
    survey: Survey | None = attrs.field(default=None, repr=False, eq=False)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in attrs.asdict(self, recurse=False).items() if k != "survey"}


@attrs.frozen
class PruneResult:
    """A pruning's plan (``dry_run``) or outcome: ``sessions`` lists every session selected, ``pruned`` the ids
    deleted (and archived), ``kept`` the selected ones left in place and why, ``protected`` the old sessions the rule
    keeps (labelled, named, pi's files) and why."""

    cutoff: str  # sessions whose last change is before this are selected
    older_than: timedelta
    dry_run: bool
    archive: str | None
    keep_labelled: bool
    keep_named: bool
    sessions: tuple[PrunedSession, ...]
    protected: tuple[tuple[str, str], ...] = ()
    pruned: tuple[str, ...] = ()
    kept: tuple[tuple[str, str], ...] = ()
    error: str | None = None

    @property
    def bytes(self) -> int:
        """The size of the sessions selected (what is known of it)."""
        return sum(s.bytes or 0 for s in self.sessions)

    def to_dict(self) -> dict[str, Any]:
        return {
            "cutoff": self.cutoff, "older_than_seconds": self.older_than.total_seconds(), "dry_run": self.dry_run,
            "archive": self.archive, "keep_labelled": self.keep_labelled, "keep_named": self.keep_named,
            "sessions": [s.to_dict() for s in self.sessions], "bytes": self.bytes,
            "protected": [{"id": i, "why": w} for i, w in self.protected], "pruned": list(self.pruned),
            "kept": [{"id": i, "why": w} for i, w in self.kept], "error": self.error,
        }


class PruneError(SessionError):
    """A pruning stopped at a failure; ``result`` lists what was done before it (nothing further was deleted)."""

    def __init__(self, error: SessionError, result: PruneResult) -> None:
        done = len(result.pruned)
        super().__init__(error.code, f"pruning stopped after {done} of {len(result.sessions)} session(s): {error.message}",
                         path=error.path, line=error.line)
        self.result = result


def prune(
    repo: Any, older_than: timedelta | str, *, keep_labelled: bool = True, keep_named: bool = False,
    dry_run: bool = False, archive: str | os.PathLike[str] | None = None, cwd: str | None = None,
    now: datetime | None = None,
) -> PruneResult:
    """Delete (with ``archive=DIR``: archive, then delete) every session of ``repo`` whose last change is older than
    ``older_than`` (a timedelta, or an age such as ``"90d"``), counted back from ``now`` (default: the repository's
    clock). Sessions with a label are kept unless ``keep_labelled=False``; a name protects one only with
    ``keep_named=True`` (apps often name every session); ``cwd`` limits it to sessions started there. The whole plan is
    computed first; ``dry_run=True`` returns it and changes nothing."""
    plan = plan_prune(repo, older_than, keep_labelled=keep_labelled, keep_named=keep_named, archive=archive, cwd=cwd,
                      now=now)
    return plan if dry_run else apply_prune(repo, plan)


def plan_prune(
    repo: Any, older_than: timedelta | str, *, keep_labelled: bool = True, keep_named: bool = False,
    archive: str | os.PathLike[str] | None = None, cwd: str | None = None, now: datetime | None = None,
) -> PruneResult:
    """Every session ``repo.prune`` would delete (see the module documentation); nothing is changed."""
    age = _age(older_than)
    moment = now if now is not None else repo._clock()
    if not isinstance(moment, datetime) or moment.tzinfo is None:
        raise TypeError(f"now must be a timezone-aware datetime, not {moment!r}")
    why = store_retention.foreign_reason(repo.store)
    if why is not None:
        raise SessionError("storage", f"not pruned: {why}")
    cutoff = moment - age
    folder = None if archive is None else os.fspath(archive)
    if folder is not None and folders.is_ours(folder):
        raise SessionError("storage", f"not pruned: {folder} is a sessiontree repository; archives go into a folder of "
                           "their own (they keep their content beside them, which the repository would collect)")
    chosen, protected = _select(repo, repo.list(cwd), cutoff, keep_labelled, keep_named, folder)
    return PruneResult(format_timestamp(cutoff), age, True, folder, keep_labelled, keep_named, tuple(chosen), tuple(protected))


def _age(older_than: Any) -> timedelta:
    if isinstance(older_than, str):
        older_than = parse_age(older_than)
    if not isinstance(older_than, timedelta):
        raise TypeError(f"older_than must be a timedelta (or an age such as '90d'), not {older_than!r}")
    if older_than < timedelta(0):
        raise ValueError(f"older_than must not be negative, not {older_than}")
    return older_than


def _select(
    repo: Any, infos: Iterable[SessionInfo], cutoff: datetime, keep_labelled: bool, keep_named: bool, folder: str | None,
) -> tuple[list[PrunedSession], list[tuple[str, str]]]:
    chosen, protected = [], []
    for info in infos:
        try:
            if parse_timestamp(info.modified) >= cutoff:
                continue
        except (ValueError, TypeError):
            protected.append((info.id, f"its last change {info.modified!r} is not a time: kept"))
            continue
        if keep_named and info.name:
            protected.append((info.id, f"named {info.name!r}"))
            continue
        try:
            survey = store_retention.survey(repo.store, info.id)
        except SessionError as exc:
            if exc.code == "not_found":
                continue  # deleted since the listing
            if exc.code not in ("corrupt", "unsupported_version"):
                raise
            protected.append((info.id, f"cannot be read ({exc}): kept, run verify"))
            continue
        if survey.pi_dialect:
            protected.append((info.id, "a pi session file (read-only for sessiontree)"))
        elif keep_labelled and survey.labelled:
            protected.append((info.id, "labelled"))
        else:
            where = None if folder is None else os.path.join(folder, archive_name(info.id))
            chosen.append(PrunedSession(info.id, info.name, info.cwd, info.modified, survey.lines - 1, survey.bytes,
                                        info.path, where, survey))
    return chosen, protected


def apply_prune(repo: Any, plan: PruneResult) -> PruneResult:
    """Carry out ``plan`` (from ``repo.prune(..., dry_run=True)``): archive, then delete, each session in turn."""
    pruned: list[str] = []
    kept: list[tuple[str, str]] = []
    try:
        for item in plan.sessions:
            try:
                _prune_one(repo.store, item, plan.archive)
            except ChangedError as exc:
                kept.append((item.id, exc.message))
                continue
            pruned.append(item.id)
    except (SessionError, OSError) as exc:
        error = exc if isinstance(exc, SessionError) else SessionError("storage", f"{exc.strerror or exc}")
        done = attrs.evolve(plan, dry_run=False, pruned=tuple(pruned), kept=tuple(kept), error=str(error))
        raise PruneError(error, done) from exc
    finally:
        store_retention.finish(repo.store)
    return attrs.evolve(plan, dry_run=False, pruned=tuple(pruned), kept=tuple(kept))


def _prune_one(store: Any, item: PrunedSession, folder: str | None) -> None:
    survey = item.survey
    if survey is None:
        raise SessionError("invalid_entry", f"session {item.id}: this plan was not made by plan_prune; make a new one")
    written = None
    lines = store_retention.lines_for_archive(store, item.id, survey)
    if folder is not None:
        written = write_archive(folder, item.id, lines, store_retention.checkpoints_of(survey), store.blobs)
    try:
        store_retention.delete_surveyed(store, item.id, survey)
    except ChangedError:
        if written is not None:  # the session stays: its archive would only be a stale copy
            written.unlink(missing_ok=True)
            Path(f"{written}{SIDECAR_SUFFIX}").unlink(missing_ok=True)
        raise
    collect(store.blobs, scope_of(store), digests_of(lines))  # its content goes too, unless another session names it
