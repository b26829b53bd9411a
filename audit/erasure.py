"""Erasure: ``session.redact(entry_id, reason=...)`` removes one entry's content and keeps the log verifiable.

The entry's line is rewritten as a *stub*: the same entry (type, id, parent, timestamp, roles and tool-call ids, so the
tree and the shape of the context stay) with its content replaced by ``[redacted]`` and a top-level ``"redacted": true``.
The stub keeps the chain digest the original line recorded, so every later line still chains, and signed checkpoints
stay valid. Before the line is rewritten, a *redaction record* is appended (a ``custom`` entry of type
``sessiontree.redaction``): which entry, the digest it had, why, and who asked. verify accepts a stub only when such a
record names its entry and digest; anything else that changes a line still fails. docs/audit.md explains what this
proves.
"""

from __future__ import annotations

from typing import Any

from sessiontree.audit.erasure_scrub import scrub
from sessiontree.content.blob_gc import collect, digests_of
from sessiontree.content.blobs import is_digest
from sessiontree.domain import aggregate as commands
from sessiontree.domain.erasure import PLACEHOLDER, RECORD_TYPE, STUB_KEY, erased, is_stub
from sessiontree.domain.errors import SessionError


def records(session: Any) -> dict[str, Any]:
    """The redaction records of a session by the id of the entry each erased (the last record counts)."""
    found = {}
    for entry in session.find_entries("custom"):
        data = entry.data
        if entry.custom_type == RECORD_TYPE and isinstance(data, dict) and isinstance(data.get("entry_id"), str):
            found[data["entry_id"]] = entry
    return found


def redact(session: Any, entry_id: str, reason: str, by: str | None = None) -> str:
    """Erase the content of ``entry_id`` (see the module's docstring); returns the redaction record's id. Redacting an
    entry again completes an erasure that was recorded but interrupted, and otherwise changes nothing."""
    if not isinstance(reason, str) or not reason.strip():
        raise SessionError("invalid_entry", "a redaction needs a reason (reason='...')")
    if by is not None and not isinstance(by, str):
        raise TypeError(f"by must be a str or None, not {by!r}")
    storage = session.storage
    storage.check_writable()
    if not storage.can_replace_lines:
        raise SessionError("storage", f"session {session.id} at {storage.location} cannot be redacted in place: "
                           f"{storage.why_no_replace}")
    with session._lock:
        entry = session.entry(entry_id)
        if entry.version == 1:
            raise SessionError("invalid_entry", "the session header cannot be erased")
        digest = storage.recorded_digest(entry.version)
        known = records(session).get(entry.id)
        if known is not None and (known.data.get("digest") != digest or known.data.get("version") != entry.version):
            known = None  # a record that does not vouch for this line (its digest or version differs) is not reused
        if is_stub(entry):
            if known is None:
                raise SessionError("corrupt", f"entry {entry.id} is a redaction stub that no redaction record names")
            _collect(storage, known.data.get("blobs"))  # an erasure interrupted after its line was rewritten
            scrub(storage)
            return str(known.id)
        stub = storage.codec.encode_event(erased(entry))
        gone = digests_of([storage.line_before(entry.version + 1)[0]])
        if known is None:
            data = {"entry_id": entry.id, "version": entry.version, "digest": digest, "reason": reason,
                    "by": by if by is not None else _who()}
            if gone:  # its content kept out of line: what is deleted once the line is rewritten
                data["blobs"] = gone
            # The record is written as it is (the pipeline's redact step passes it by): a redactor must not rewrite the
            # digest it vouches with.
            record_id = session._run(lambda agg, id, now: commands.append_custom_entry(
                agg, RECORD_TYPE, data, id=id, timestamp=now), None)
        else:
            record_id = known.id
        storage.replace_line(entry.version, stub, digest)
        _collect(storage, gone)
        scrub(storage)  # the caches that quote the session, and what a crash left (erasure_scrub.py)
        session.reload()
        return str(record_id)


def _collect(storage: Any, digests: Any) -> None:
    """Delete the erased entry's blobs unless another entry of a log sharing the store still refers to them."""
    if isinstance(digests, list) and digests:
        path = getattr(storage, "path", None)  # the logs sharing the store: the file's folder, or the recorder
        collect(storage.blobs, path.parent if path is not None else getattr(storage, "recorder", None),
                [d for d in digests if is_digest(d)])


def _who() -> str | None:
    import getpass  # here, not at import: it loads the terminal modules, which a reader never needs

    try:
        return getpass.getuser()
    except Exception:  # no user name in this environment (a container without passwd entry)
        return None


__all__ = ["PLACEHOLDER", "RECORD_TYPE", "STUB_KEY", "erased", "is_stub", "records", "redact"]
