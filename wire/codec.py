"""The wire codec of one dialect: events to JSON lines and back (SPEC 2.2).

``encode_event`` turns a header or entry event into one line (bytes, no newline); ``decode_line`` turns a line back
into the event. Both follow the dialect's schemas (``schema.py``): writing through the encoders made from them
(``encoders.py``) and msgspec, reading through msgspec's typed decoding (``wire.py``) and, for whatever that
refuses, the complete reading beside it. Every failure to read is ``SessionError("corrupt")``; nothing read from a
file can import or run code, because classes come only from the schemas.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

import msgspec

from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import Entry, SessionStarted, UnknownEntryAppended
from sessiontree.wire import jsontext
from sessiontree.wire.encoders import Encoders, Writers, refuse_clash
from sessiontree.wire.jsontext import line_problem, parse, repeated_key
from sessiontree.wire.schema import NATIVE, PARENT_SESSION_KEY, Dialect, schemas
from sessiontree.wire.wire import Malformed, Structurer, WireDecoder

CHAIN_KEY = "chain"
Warn = Callable[[str], None]


def corrupt(message: str) -> SessionError:
    return SessionError("corrupt", message)


class Codec:
    """Encode and decode events and messages for one dialect."""

    def __init__(self, dialect: Dialect = NATIVE, writers: Writers | None = None) -> None:
        self.dialect = dialect
        self.schemas = schemas(dialect)
        self.encoders = Encoders(self.schemas, lambda cls: (self._wire or self._typed()).struct_of(cls), writers)
        self._dumps = msgspec.json.Encoder().encode
        self.written_as_dicts: frozenset[type] = frozenset()  # entry types ``event_dict`` writes (a dialect's own)
        # Native lines carry the hash chain's field; readers read past it (audit/chain.py).
        self._chained = dialect.name == "native"
        self.warns = not self._chained  # a repeated key is warned of (pi's dialect), not refused: decode_line's ``warn``
        self.structurer = Structurer(self.schemas, dialect.parent_key)
        self._wire: WireDecoder | None = None  # built on first use: a header-only open needs none
        self._canonical = msgspec.json.Encoder().encode
        # Events whose line does not decode back to them alone (pi's leaf markers are read in
        # the context of their file): a reader must keep such an event, not its line.
        self.stand_ins: frozenset[type[Entry]] = frozenset()

    def encode_event(self, event: Any) -> bytes:
        """One JSON line (no newline) for an event."""
        extra = event.extra
        if self._chained and (CHAIN_KEY in extra or (isinstance(event, UnknownEntryAppended) and CHAIN_KEY in event.data)):
            raise SessionError(  # an unknown field, or an unknown entry type's: sealing would repeat the key
                "invalid_entry", f"entry {getattr(event, 'id', event.originator_id)!r} of session "
                f"{event.originator_id} has a field named {CHAIN_KEY!r}, which the tamper-evidence chain reserves",
            )
        try:
            cls = event.__class__
            if cls in self.written_as_dicts or cls not in self.schemas:
                return self._dumps(self.event_dict(event))
            return self.encoders.line(event)
        except (TypeError, ValueError, OverflowError) as exc:
            raise SessionError(
                "invalid_entry", f"entry {getattr(event, 'id', '?')!r} is not JSON-serialisable: {exc}"
            ) from None

    def event_dict(self, event: Any) -> dict[str, Any]:
        if isinstance(event, SessionStarted):
            return self.header_dict(event)
        if isinstance(event, UnknownEntryAppended):
            return dict(event.data)
        # the ignore below: the wire form of an entry is a dict
        return self.encoders.wire(event)  # type: ignore[no-any-return]

    def header_dict(self, header: SessionStarted) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": "session", "version": header.version, "id": header.originator_id, "timestamp": header.timestamp,
            "cwd": header.cwd, PARENT_SESSION_KEY: header.parent_session, "metadata": dict(header.metadata),
        }
        if header.extra:
            refuse_clash(out, header.extra, "session header")
            out.update(header.extra)
        return out

    def message_to_dict(self, message: Any) -> Any:
        """A message as its wire dict (``--json`` context output), plain JSON values."""
        return msgspec.json.decode(self.encoders.line(message))

    def decode_line(self, line: bytes, session_id: str, version: int, warn: Warn | None = None) -> Any:
        """The event of a line (the header at version 1): typed decoding first, the complete reading for what it
        refuses. A line that cannot be parsed safely, or (natively) that repeats a key in one object, is
        ``corrupt``; ``warn`` hears of a repeat in other dialects, whose readers take the last value."""
        size = len(line)
        if size > jsontext.MAX_VALUES or size > jsontext.MAX_LINE_BYTES:  # a shorter line is within both limits
            problem = line_problem(line, duplicates=False)
            if problem is not None:
                raise corrupt(problem)
        if version == 1:
            data = self._parse(line)
            if self._canonical(data) != line:  # the header too: not as a writer lays it out, look for repeats
                self._check_repeats(line, warn)
            if isinstance(data, dict) and self._chained:
                data.pop(CHAIN_KEY, None)
            return self.decode_header(data)
        wire = self._wire or self._typed()
        try:  # WireDecoder.decode, written out here
            struct = wire.decode_struct(line)
        except (msgspec.DecodeError, RecursionError):
            struct = None
        if struct is not None and struct.id:  # (an empty id is corrupt: the complete reading says so)
            makers = wire.makers
            entry = makers[type(struct)](struct, makers, session_id, version)
            if self._canonical(struct) != line:  # not as our writer lays it out: look for repeats
                self._check_repeats(line, warn)
            return entry
        self._check_repeats(line, warn)
        data = self._parse(line)
        if isinstance(data, dict) and self._chained:
            data.pop(CHAIN_KEY, None)
        return self.decode_entry(data, session_id, version)

    def _typed(self) -> WireDecoder:
        self._wire = WireDecoder(self.schemas, CHAIN_KEY if self._chained else None)
        return self._wire

    def _parse(self, line: bytes) -> Any:
        try:
            return parse(line)
        except (ValueError, RecursionError) as exc:
            raise corrupt(f"invalid JSON ({exc})") from None

    def _check_repeats(self, line: bytes, warn: Warn | None) -> None:
        key = repeated_key(line)
        if key is None:
            return
        message = f"key {key!r} appears twice in one object"
        if self._chained:
            raise corrupt(f"{message} (which value counts is ambiguous)")
        if warn is not None:
            warn(f"{message}; its last value is read, as pi does")

    def decode_entry(self, data: Any, session_id: str, version: int) -> Entry:
        """An entry from a parsed line (the complete reading)."""
        return self.structurer.entry(data, session_id, version)

    def decode_header(self, data: Any) -> SessionStarted:
        if not isinstance(data, dict) or data.get("type") != "session":
            raise corrupt("the first line is not a session header")
        sid = data.get("id")
        if not isinstance(sid, str) or not sid:  # a damaged header is corrupt before it is unsupported
            raise corrupt("session header has no string 'id'")
        version = data.get("version", 1)
        if not isinstance(version, int) or isinstance(version, bool):
            raise corrupt(f"session header version {version!r} is not a number")
        if version != 3:
            raise SessionError("unsupported_version", f"session format version {version} is not supported")
        return self.header_from(data, version, PARENT_SESSION_KEY, lambda extra: extra)

    def header_from(
        self, data: dict[str, Any], version: int, parent_key: str, extra: Callable[[dict[str, Any]], Any]
    ) -> SessionStarted:
        """The header event of a header line whose type and version were checked; the fields
        the dialect does not know are passed to ``extra`` (which makes the event's ``extra``)."""
        sid, timestamp = data.get("id"), data.get("timestamp")
        cwd, parent, metadata = data.get("cwd", ""), data.get(parent_key), data.get("metadata", {})
        if not isinstance(sid, str) or not sid:
            raise corrupt("session header has no string 'id'")
        if not isinstance(timestamp, str):
            raise corrupt("session header has no string 'timestamp'")
        if not isinstance(cwd, str) or (parent is not None and not isinstance(parent, str)):
            raise corrupt(f"session header 'cwd' / '{parent_key}' must be strings")
        if not isinstance(metadata, dict):
            raise corrupt("session header 'metadata' must be an object")
        known = {"type", "version", "id", "timestamp", "cwd", parent_key, "metadata"}
        return SessionStarted(
            originator_id=sid, timestamp=timestamp, cwd=cwd, version=version, parent_session=parent, metadata=metadata,
            extra=extra({k: v for k, v in data.items() if k not in known}),
        )

    def message_from_dict(self, data: Any) -> Any:
        return self._value(self.structurer.message, data)

    def content_from_dict(self, data: Any) -> Any:
        return self._value(self.structurer.content, data)

    def _value(self, read: Callable[[Any], Any], data: Any) -> Any:
        try:
            return read(data)
        except Malformed as exc:
            raise corrupt(str(exc)) from None


@cache
def native_codec() -> Codec:
    """The shared codec of the native dialect."""
    return Codec(NATIVE)
