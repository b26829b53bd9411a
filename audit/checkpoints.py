"""Signed checkpoints: a key holder vouches for a log's chain digest at one line (docs/audit.md).

A chain shows a log is consistent with itself, not that whole-file rewrites or lines cut from the end did not
happen; a checkpoint signs ``(session id, line, digest, time)`` with an HMAC secret (``bytes``) or an Ed25519 key
(``cryptography``, the ``signing`` extra), and may be kept beside a file, one a line, in ``<file>.checkpoints``.
verify checks them against the log with ``check_checkpoints``.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from sessiontree.domain.errors import SessionError
from sessiontree.domain.ids import now_iso
from sessiontree.storage.files import open_regular
from sessiontree.wire.jsontext import DECODE_ERRORS, dumps, loads

if TYPE_CHECKING:
    from sessiontree.audit.verify import VerifyReport

HMAC = "hmac-sha256"
ED25519 = "ed25519"
MIN_HMAC_KEY = 16
SIDECAR_SUFFIX = ".checkpoints"
_MAX_SIDECAR = 16 * 1024 * 1024


@attrs.frozen
class Checkpoint:
    """A signature over the chain digest of one session's log at one line."""

    session_id: str
    line: int
    digest: str  # hex, the chain digest of lines 1..line
    created: str  # ISO 8601, when it was signed
    algorithm: str  # "hmac-sha256" or "ed25519"
    signature: str  # hex
    key_id: str | None = None
    # 1, 2, 3, ... per log, signed with the rest: a checkpoint removed from the middle of the
    # sequence is seen as a gap (None: a checkpoint made before sequences, still verifiable)
    sequence: int | None = None

    def message(self) -> bytes:
        """The bytes that are signed."""
        fields = [self.session_id, str(self.line), self.digest, self.created]
        if self.sequence is None:
            return "\n".join(("sessiontree-checkpoint-v1", *fields)).encode()
        return "\n".join(("sessiontree-checkpoint-v2", *fields, str(self.sequence))).encode()

    def to_dict(self) -> dict[str, Any]:
        return {"type": "checkpoint", **attrs.asdict(self)}

    def to_json(self) -> str:
        return dumps(self.to_dict()).decode()

    @classmethod
    def from_dict(cls, data: Any) -> Checkpoint:
        if not isinstance(data, dict) or data.get("type") != "checkpoint":
            raise SessionError("corrupt", f"not a checkpoint: {str(data)[:80]!r}")
        fields = {a.name for a in attrs.fields(cls)}
        try:
            out = cls(**{k: v for k, v in data.items() if k in fields})
        except TypeError as exc:
            raise SessionError("corrupt", f"checkpoint is missing a field: {exc}") from None
        strings = (out.session_id, out.digest, out.created, out.algorithm, out.signature)
        if not all(isinstance(v, str) for v in strings) or isinstance(out.line, bool) or not isinstance(out.line, int):
            raise SessionError("corrupt", "checkpoint fields have the wrong types")
        if out.key_id is not None and not isinstance(out.key_id, str):
            raise SessionError("corrupt", "checkpoint key_id must be a string")
        if out.sequence is not None and (type(out.sequence) is not int or out.sequence < 1):
            raise SessionError("corrupt", "checkpoint sequence must be a whole number from 1")
        return out

    @classmethod
    def from_json(cls, text: str | bytes) -> Checkpoint:
        try:
            data = loads(text)
        except DECODE_ERRORS as exc:
            raise SessionError("corrupt", f"checkpoint is not valid JSON ({exc})") from None
        return cls.from_dict(data)


def parse_all(items: Iterable[Any]) -> list[Checkpoint]:
    """Checkpoints from ``Checkpoint`` objects, dicts or JSON strings."""
    out = []
    for item in items:
        if isinstance(item, Checkpoint):
            out.append(item)
        elif isinstance(item, dict):
            out.append(Checkpoint.from_dict(item))
        elif isinstance(item, (str, bytes)):
            out.append(Checkpoint.from_json(item))
        else:
            raise TypeError(f"not a checkpoint: {item!r}")
    return out


def key_algorithm(key: Any) -> str:
    """``HMAC`` or ``ED25519``: what ``key`` signs with (``ValueError``/``TypeError`` for anything else)."""
    if isinstance(key, (bytes, bytearray)):
        if len(key) < MIN_HMAC_KEY:
            raise ValueError(f"an HMAC key needs at least {MIN_HMAC_KEY} bytes (use os.urandom(32))")
        return HMAC
    if isinstance(key, str):
        raise TypeError("pass the HMAC key as bytes, not str")
    module = type(key).__module__
    if module.startswith("cryptography.") and "ed25519" in module.lower() + type(key).__name__.lower():
        return ED25519
    raise TypeError(f"a checkpoint key is HMAC key bytes or an Ed25519 key from 'cryptography', not {type(key).__name__}")


def _sign(key: Any, message: bytes) -> str:
    if key_algorithm(key) == HMAC:
        return hmac.new(bytes(key), message, hashlib.sha256).hexdigest()
    if not hasattr(key, "sign"):
        raise TypeError("signing needs the Ed25519 private key (a public key can only verify)")
    signature: bytes = key.sign(message)
    return signature.hex()


def signature_valid(key: Any, checkpoint: Checkpoint) -> bool:
    """Does ``checkpoint`` carry a valid signature by ``key`` (or, for Ed25519, its public key)?"""
    message = checkpoint.message()
    if key_algorithm(key) == HMAC:
        return hmac.compare_digest(_sign(key, message), checkpoint.signature)
    from cryptography.exceptions import InvalidSignature

    public = key.public_key() if hasattr(key, "public_key") else key
    try:
        public.verify(bytes.fromhex(checkpoint.signature), message)
    except (InvalidSignature, ValueError):
        return False
    return True


def sign_checkpoint(target: Any, key: Any, *, key_id: str | None = None, sequence: int | None = None) -> Checkpoint:
    """A checkpoint of ``target``'s log as it is now, signed with ``key``.

    For a live ``Session`` (or its storage) the chain head it holds is signed as is (O(1)): the process vouches for
    what it wrote and read. For a path, the file is verified first (O(size)) and a damaged or unchained log is
    refused (``SessionError('corrupt')``). ``sequence`` numbers the checkpoint (1, 2, 3, ... per log); by default it
    follows the last checkpoint kept beside the session file, or is 1 for a log without a file (keep your own
    count there, and pass it).
    """
    algorithm = key_algorithm(key)
    storage = getattr(target, "storage", target)
    head = getattr(storage, "chain_head", None)
    version = getattr(target, "version", None)
    if head is not None and head.digest and (version is None or head.version == version):
        session_id, line, digest = storage.session_id, head.version, head.digest.hex()
    else:
        from sessiontree.audit.verify import verify

        report = verify(target)
        if not report.ok or not report.chained or report.head is None or report.session_id is None:
            reason = "it is not hash-chained" if report.ok else f"it does not verify: {report.problems[0]}"
            raise SessionError("corrupt", f"cannot sign a checkpoint of {report.source}: {reason}")
        session_id, line, digest = report.session_id, report.lines, report.head
    if sequence is None:
        sequence = _next_sequence(storage)
    elif type(sequence) is not int or sequence < 1:
        raise ValueError(f"a checkpoint sequence is a whole number from 1, not {sequence!r}")
    unsigned = Checkpoint(session_id, line, digest, now_iso(), algorithm, "", key_id, sequence)
    return attrs.evolve(unsigned, signature=_sign(key, unsigned.message()))


def _next_sequence(storage: Any) -> int:
    """One more than the highest sequence kept beside the session file (1 if none)."""
    path = storage if isinstance(storage, (str, os.PathLike)) else getattr(storage, "path", None)
    if path is None:
        return 1
    kept = [cp.sequence or 0 for cp in load_checkpoints(path)]
    return max(kept, default=0) + 1


def sidecar(path: str | os.PathLike[str]) -> Path:
    """Where the checkpoints of a session file are kept: ``<file>.checkpoints``."""
    return Path(os.fspath(path) + SIDECAR_SUFFIX)


def save_checkpoint(path: str | os.PathLike[str], checkpoint: Checkpoint) -> Path:
    """Append ``checkpoint`` to the sidecar of the session file ``path`` (created 0600)."""
    return append_checkpoint(sidecar(path), checkpoint)


def load_checkpoints(path: str | os.PathLike[str]) -> list[Checkpoint]:
    """The checkpoints kept beside the session file ``path`` (none if there is no sidecar)."""
    return read_checkpoint_file(sidecar(path), missing_ok=True)


def append_checkpoint(where: str | os.PathLike[str], checkpoint: Checkpoint) -> Path:
    """Append ``checkpoint`` to a file of checkpoints (created 0600), e.g. one kept on another
    machine, away from the logs: a rollback of a log and its sidecar then shows."""
    where = Path(where)
    line = checkpoint.to_json().encode() + b"\n"
    try:
        fd = os.open(where, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK, 0o600)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(errno.EINVAL, "not a regular file")
            os.write(fd, line)
        finally:
            os.close(fd)
    except OSError as exc:
        raise SessionError("storage", f"cannot write the checkpoint: {exc.strerror or exc}", path=str(where)) from exc
    return where


def read_checkpoint_file(where: str | os.PathLike[str], *, missing_ok: bool = False) -> list[Checkpoint]:
    """The checkpoints in a file of checkpoints, one JSON object a line."""
    try:
        fd = open_regular(where)
        try:
            data = os.read(fd, _MAX_SIDECAR + 1)
        finally:
            os.close(fd)
    except FileNotFoundError:
        if missing_ok:
            return []
        raise SessionError("not_found", "no checkpoint file there", path=str(where)) from None
    except OSError as exc:
        raise SessionError("storage", f"cannot read the checkpoints: {exc.strerror or exc}", path=str(where)) from exc
    if len(data) > _MAX_SIDECAR:
        raise SessionError("corrupt", f"the checkpoint file is over {_MAX_SIDECAR} bytes", path=str(where))
    out = []
    for lineno, line in enumerate(data.splitlines(), 1):
        if line.strip():
            try:
                out.append(Checkpoint.from_json(line))
            except SessionError as exc:
                raise SessionError("corrupt", exc.message, path=str(where), line=lineno) from None
    return out


def check_checkpoints(report: VerifyReport, checkpoints: list[Checkpoint], key: Any) -> None:
    """Each checkpoint must be signed by ``key``, for this session, and match the log's digest at its line;
    their sequence must have no gap; the lines after the last one are unverified."""
    if not checkpoints:
        if key is not None:
            report.problem(None, "a key was given but there is no signed checkpoint to check the log against")
        return
    if key is None:
        raise ValueError("checking signed checkpoints needs the key (key=...)")
    good = [cp for cp in checkpoints if _check_one(report, cp, key)]
    report.checkpoints = len(good)
    _check_sequence(report, good)
    last = max((cp.line for cp in good), default=0)
    if good and last < report.lines:
        report.unverified_from = last + 1


def _check_one(report: VerifyReport, cp: Checkpoint, key: Any) -> bool:
    where = f"checkpoint {cp.sequence or ''} of line {cp.line} signed {cp.created}".replace("checkpoint  ", "checkpoint ")
    algorithm = key_algorithm(key)
    if cp.algorithm != algorithm:
        report.problem(None, f"{where} is {cp.algorithm}, but the key given is for {algorithm}")
    elif not signature_valid(key, cp):
        report.problem(None, f"{where}: the signature does not verify with this key (forged, or another key)")
    elif cp.session_id != report.session_id:
        report.problem(None, f"{where} is for session {cp.session_id}, not {report.session_id}")
    elif cp.line > report.lines:
        report.problem(report.lines + 1, f"the log ends at line {report.lines}, but a {where} vouches for {cp.line} "
                       f"lines: lines {report.lines + 1}..{cp.line} were removed")
    elif cp.line not in report.digests:
        report.problem(cp.line, f"{where}: the log has no chain digest at that line")
    elif report.digests[cp.line].hex() != cp.digest:
        report.problem(cp.line, f"the log up to line {cp.line} differs from what the {where} vouches for")
    else:
        return True
    return False


def _check_sequence(report: VerifyReport, good: list[Checkpoint]) -> None:
    """Numbered checkpoints must follow each other (..., 4, 5, 6, ...) with lines that never go back: a gap means
    checkpoints were removed from the middle (an edit of the checkpoint file). A file may keep a later run only
    (from 4 on); cutting off the last ones is a rollback, which only an anchor kept elsewhere shows (docs/audit.md)."""
    numbered = sorted((cp.sequence, cp.line) for cp in good if cp.sequence is not None)
    expected = numbered[0][0] if numbered else 1
    previous_line = 0
    for sequence, line in numbered:
        if sequence > expected:
            missing = f"{expected}" if sequence == expected + 1 else f"{expected}..{sequence - 1}"
            report.problem(None, f"signed checkpoint(s) {missing} are missing (the sequence jumps to {sequence}): "
                           "checkpoints were removed, or the checkpoint file was rolled back")
        if line < previous_line:
            report.problem(line, f"checkpoint {sequence} vouches for line {line}, before the line an earlier one "
                           f"vouches for ({previous_line})")
        expected = max(expected, sequence + 1)
        previous_line = max(previous_line, line)


__all__ = [
    "Checkpoint", "append_checkpoint", "load_checkpoints", "read_checkpoint_file", "save_checkpoint", "sidecar",
    "sign_checkpoint",
]
