"""The one path between an entry and its stored line, in the manner of eventsourcing's ``Mapper`` (which applies its
transcoder, compressor and cipher in one place): on the way in **redact → encode → outline → seal**, on the way out
**inline → decode**. A storage only keeps lines and gives them back; each feature that changes what a line holds is a
step here, never a method of every storage class:

- redact: the session's redactors over every string of the entry (``content/redaction.py``). It runs on the entry,
  before the encode, because the live session folds the entry exactly as the log holds it, and redactors are
  str -> str functions over the entry's strings (which a line holds escaped);
- encode: the dialect's codec (``wire/codec.py``), after what the dialect refuses to store (pi: a retained tail);
- outline: large content put into the blob store and replaced by a reference (``content/blobs.py``);
- seal: each line chained to the one before (``audit/chain.py``); the pipeline keeps the chain's head.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sessiontree.audit import chain
from sessiontree.content import blobs as blob_lines
from sessiontree.domain.erasure import RECORD_TYPE
from sessiontree.domain.errors import SessionError
from sessiontree.domain.events import CustomEntryAppended
from sessiontree.wire.codec import Codec

DEFAULT: Any = "default"  # the default redactor (content/redaction.py), compiled on first use


class Redaction:
    """One set of redactors and the walk made from them: a storage's pipeline holds one, and so does each Session (its
    own: another Session made over the same storage may have others)."""

    def __init__(self, redactors: Any = ()) -> None:
        """None or ``()``: none; ``DEFAULT``: the default (``SecretRedactor``, made when first needed: a process that only
        reads never compiles its rules)."""
        if redactors is None or (type(redactors) is tuple and not redactors):  # a reading process imports no redactor
            redactors = ()
        elif not (isinstance(redactors, str) and redactors == DEFAULT):
            from sessiontree.content.redaction import check_redactors

            redactors = check_redactors(redactors)
        self._redactors: Any = redactors
        self._redact: Callable[[Any], Any] | None = None

    @property
    def redactors(self) -> tuple[Callable[[str], str], ...]:
        if isinstance(self._redactors, str):
            from sessiontree.content.redaction import default_redactors

            self._redactors = default_redactors()
        return self._redactors  # type: ignore[no-any-return]

    def redact(self, entry: Any) -> Any:
        """``entry`` with its strings through the redactors (the very same object when none changed). The library's own
        redaction record is not: it holds a digest, which no rule may touch, and no app may write that type."""
        return self.redacted((entry,))[0]

    def redacted(self, events: Sequence[Any]) -> Sequence[Any]:
        """``events`` redacted (the same sequence when there are no redactors)."""
        if not self._redactors:
            return events
        redact = self._redact
        if redact is None:
            redact = self._redact = self._walk()
        if redact is _unchanged:
            return events
        out = []
        for event in events:  # a loop, not a comprehension: one call fewer per append
            # only the record (a custom entry): a custom message entry of that type is an app's text
            own = event.__class__ is CustomEntryAppended and event.custom_type == RECORD_TYPE
            out.append(event if own else redact(event))
        return out

    def _walk(self) -> Callable[[Any], Any]:
        if not self.redactors:
            return _unchanged
        from sessiontree.content.redaction import entry_redactor

        return entry_redactor(self.redactors)


AS_GIVEN = Redaction()  # no redactors: what ``save`` stores on every backend (redaction is ``append``'s first step)


class LinePipeline:
    """The steps one storage's lines go through (see the module documentation)."""

    def __init__(self, codec: Codec, blobs: Any = None) -> None:
        self.codec = codec
        self.head = chain.ChainHead()  # the digest of the last line this storage knows (seal)
        self.refuse: Callable[[Sequence[Any]], None] | None = None  # what the dialect will not store (raises)
        self.redaction = Redaction()  # an append without a session's own (an app appending to the storage directly)
        self._blobs: Any = None
        self._shared: Any = None
        self.blobs = blobs

    # -- redact ---------------------------------------------------------------------------------------------------
    def redact_with(self, redactors: Any) -> None:
        """The redactors an append given no others goes through (see ``Redaction``)."""
        self.redaction = Redaction(redactors)

    def redacted(self, events: Sequence[Any], redaction: Redaction | None = None) -> Sequence[Any]:
        """``events`` through ``redaction`` (a session's), else through this pipeline's."""
        return (self.redaction if redaction is None else redaction).redacted(events)

    # -- encode and outline ---------------------------------------------------------------------------------------
    def encode(self, events: Sequence[Any]) -> list[bytes]:
        """The lines of ``events``, not yet outlined or sealed; what the dialect will not store is refused first."""
        if self.refuse is not None:
            self.refuse(events)
        encode = self.codec.encode_event
        return [encode(events[0])] if len(events) == 1 else [encode(event) for event in events]

    @property
    def blobs(self) -> Any:
        """Where content kept out of line lives (None: every line holds its content)."""
        return self._blobs

    @blobs.setter
    def blobs(self, store: Any) -> None:
        self._blobs, self._shared = store, None

    def read_afresh(self) -> None:
        """A whole log is read again: the content read back from blobs for the last read is not kept for this one (it
        is bounded, but a storage held open for long would hold it all along)."""
        self._shared = None

    @property
    def marker(self) -> bytes | None:
        """What a line that refers to content kept out of line holds (None: no line here can): only such a line needs
        ``decode`` here, any other goes straight to the codec."""
        return blob_lines.MARKER if self._blobs is not None else None

    def outlines(self, lines: Sequence[bytes]) -> bool:
        """Might one of ``lines`` keep content out of line (so its blobs must be kept until the line is written)?"""
        store = self._blobs
        if store is None or store.threshold is None:
            return False
        threshold, image = store.threshold, blob_lines.IMAGE
        for line in lines:  # noqa: SIM110 - a loop, not any() over a generator: one call fewer per append
            if len(line) > threshold or image in line:
                return True
        return False

    def outline(self, lines: list[bytes], put: list[tuple[str, bytes]] | None = None, *, defer: bool = False) -> list[bytes]:
        """``lines`` with their large content put into the blob store (``put`` gets each blob; ``defer``: only there)."""
        store = self._blobs
        if store is None:
            return lines
        return [blob_lines.outline(line, store, put, defer=defer) for line in lines]

    def lines(self, events: Sequence[Any], put: list[tuple[str, bytes]] | None = None, *, defer: bool = False) -> list[bytes]:
        """encode → outline: the unsealed lines of ``events`` (already redacted)."""
        return self.outline(self.encode(events), put, defer=defer)

    # -- seal -----------------------------------------------------------------------------------------------------
    @staticmethod
    def seal(lines: list[bytes], digest: bytes | None) -> tuple[list[bytes], bytes | None]:
        """``lines`` each sealed after the one before, the first after ``digest`` (None: the log is not chained)."""
        if digest is None:
            return lines, None
        return chain.seal_lines(lines, digest)

    def digest_before(self, version: int, storage: Any) -> bytes | None:
        """The digest the line of ``version`` chains to (None: the log is not chained): the head this pipeline holds,
        else the one recorded on the line before (``storage.line_before``, read once)."""
        if version == 1:
            return chain.GENESIS if self.codec.dialect.name == "native" and storage.chain_new_sessions else None
        head = self.head
        if head.version != version - 1:  # not looked yet, or stale
            head.observe(version - 1, *storage.line_before(version))
        if head.digest is None and head.chained:
            raise SessionError(
                "corrupt", f"session {storage.session_id} is hash-chained but version {version - 1} carries no chain "
                "digest: the log was damaged (run verify); it is not extended unchained",
            )
        return head.digest

    @staticmethod
    def recorded_digest(line: bytes) -> str | None:
        """The chain digest (hex) a stored line records; None in an unchained log."""
        digest = chain.split(line)[1]
        return digest.decode("ascii") if digest is not None else None

    # -- the way out: inline → decode -----------------------------------------------------------------------------
    def decode(self, line: bytes, session_id: str, version: int, warn: Any = None) -> Any:
        """The event of a stored line, its content kept out of line read back (each blob once: ``blobs.py``)."""
        store = self._blobs
        if store is None or blob_lines.MARKER not in line:
            return self.codec.decode_line(line, session_id, version, warn)
        shared = self._shared
        if shared is None:
            from sessiontree.content.blobs import SharedContent

            shared = self._shared = SharedContent(store)
        line = blob_lines.inline(line, store, read=shared.reader(lambda: ""))  # the caller names the session and line
        return shared.share(self.codec.decode_line(line, session_id, version, warn))


def _unchanged(entry: Any) -> Any:
    return entry
