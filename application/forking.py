"""Forking: the entries of a new session made of a root-to-target path of another (SPEC 4).

A fork keeps the path's entries with their ids (versions renumbered), leaves out the label
entries whose target is not on the path (their children hang from the label's parent, as in
pi), and adds the label and name entries that make the fork's labels and name the source's
current ones.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import Entry, LabelChanged, SessionRenamed
from sessiontree.domain.ids import IdGenerator

if TYPE_CHECKING:
    from sessiontree.session import Session


def fork_leaf(source: Session, entry_id: str | None, position: str) -> str | None:
    if entry_id is None:
        return source.leaf_id
    target = source.get_entry(entry_id)
    if position == "at":
        return entry_id
    message = getattr(target, "message", None)
    if target.type != "message" or getattr(message, "role", None) != "user":
        raise SessionError(
            "invalid_fork_target",
            f"cannot fork session {source.id} before entry {entry_id!r}: it is a "
            f"{target.type}{' (' + str(getattr(message, 'role', '')) + ')' if target.type == 'message' else ''} "
            "entry, not a user message (use position='at')",
        )
    return target.parent_id


def fork_entries(
    source: Session, path: list[Entry], new_id: str, new_entry_id: IdGenerator, now: str
) -> list[Entry]:
    """The path (same ids, versions renumbered), then the label and name entries that make
    the fork's labels and name the source's current ones.

    Entries are copied as they are, except that label entries whose target is not on the
    path are left out (their target does not exist in the fork); their children are
    re-parented to the label's parent, as pi does.
    """
    out: list[Entry] = []
    version = 1
    dropped = _labels_off_the_path(path)
    replaced: dict[str, str | None] = {}  # dropped label -> the parent its children get
    successor: dict[str, str | None] = {}  # dropped label -> the next entry kept after it
    pending: list[str] = []
    for entry in path:
        parent = entry.parent_id
        while parent in replaced:
            parent = replaced[parent]
        if entry.id in dropped:
            replaced[entry.id] = parent
            pending.append(entry.id)
            continue
        for label_id in pending:
            successor[label_id] = entry.id
        pending.clear()
        changes: dict[str, Any] = {"originator_id": new_id, "originator_version": version + 1, "parent_id": parent}
        kept = getattr(entry, "first_kept_entry_id", None)
        if entry.type == "compaction" and kept in dropped:
            # The compaction kept from a label that cannot come along: keep from the entry
            # after it instead (labels are not context, so the context is the same).
            after = successor.get(kept)
            changes["first_kept_entry_id"] = after if after is not None and after != entry.id else None
        version += 1
        out.append(attrs.evolve(entry, **changes))
    on_path = {e.id for e in out}
    have: dict[str, str] = {}
    for entry in out:
        if entry.type == "label":
            if entry.label:  # type: ignore[attr-defined]
                have[entry.target_id] = entry.label  # type: ignore[attr-defined]
            else:
                have.pop(entry.target_id, None)  # type: ignore[attr-defined]
    want = source.get_labels()
    latest: dict[str, Entry] = {}
    for label_entry in source.find_entries("label"):
        if label_entry.target_id in on_path:  # type: ignore[attr-defined]
            latest[label_entry.target_id] = label_entry  # type: ignore[attr-defined]
    used = set(on_path)
    last = out[-1].id if out else None
    for target, label_entry in sorted(latest.items(), key=lambda kv: kv[1].originator_version):
        if want.get(target) == have.get(target) or label_entry.id in used:
            continue
        version += 1
        # The source's own latest label entry for the target, re-created after the path
        # (its id and time kept, as pi does), so the label reads the same in the fork.
        out.append(
            LabelChanged(
                originator_id=new_id,
                originator_version=version,
                timestamp=label_entry.timestamp,
                id=label_entry.id,
                parent_id=last,
                target_id=target,
                label=want.get(target),
            )
        )
        used.add(label_entry.id)
        last = label_entry.id
    name = source.get_session_name()
    names = [e.name for e in out if e.type == "session_info"]  # type: ignore[attr-defined]
    current = (names[-1] or "").strip() or None if names else None
    if current != name:  # the fork carries the source's current name (None clears one on the path)
        entry_id = new_entry_id()
        while entry_id in used:
            entry_id = new_entry_id()
        version += 1
        out.append(
            SessionRenamed(
                originator_id=new_id, originator_version=version, timestamp=now, id=entry_id, parent_id=last, name=name
            )
        )
    return out


def _labels_off_the_path(path: list[Entry]) -> set[str]:
    """Label entries on the path whose target is not (or no longer) in the fork."""
    kept = {e.id for e in path}
    dropped: set[str] = set()
    changed = True
    while changed:
        changed = False
        for entry in path:
            if entry.type == "label" and entry.id not in dropped and entry.target_id not in kept:  # type: ignore[attr-defined]
                dropped.add(entry.id)
                kept.discard(entry.id)
                changed = True
    return dropped
