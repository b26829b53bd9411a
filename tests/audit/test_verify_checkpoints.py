"""verify() with signed checkpoints: what a chain alone cannot see (a cut tail, a rewrite), keys, and where the
checkpoints are kept."""

from __future__ import annotations

from pathlib import Path

import pytest
import sessiontree_testkit as kit
from sessiontree_verifykit import KEY, altered, lines_of, make_file, reseal, write

from sessiontree import JsonlSessionStorage, Session, SessionError, verify
from sessiontree.audit import chain
from sessiontree.audit.checkpoints import Checkpoint, load_checkpoints, save_checkpoint, sign_checkpoint

# -- what a chain alone cannot see, and signed checkpoints ---------------------------------------


def test_a_cut_tail_or_a_rewrite_needs_a_checkpoint(tmp_path: Path) -> None:
    """Removing the last lines, or editing and recomputing every digest, passes the plain chain
    but fails against a signed checkpoint."""
    path = make_file(tmp_path)
    checkpoint = sign_checkpoint(path, KEY)
    lines = lines_of(path)
    cut = write(tmp_path / "cut.jsonl", lines[:-2])
    rewritten = write(tmp_path / "re.jsonl", reseal([lines[0], lines[1].replace(b"question 0", b"question X"), *lines[2:]]))
    assert verify(cut).ok and verify(rewritten).ok
    report = verify(cut, key=KEY, checkpoints=[checkpoint])
    assert not report.ok and report.problems[0].line == len(lines) - 1 and "were removed" in report.problems[0].message
    report = verify(rewritten, key=KEY, checkpoints=[checkpoint])
    assert not report.ok and report.problems[0].line == len(lines)
    assert verify(path, key=KEY, checkpoints=[checkpoint]).checkpoints == 1


def test_checkpoints_from_a_live_session_and_from_the_file_agree(tmp_path: Path) -> None:
    """Signing a live session uses the head it holds; signing the path verifies first: same digest."""
    path = make_file(tmp_path)
    session = Session(JsonlSessionStorage.open(path))
    session.append_message(kit.user("one more"))
    live = sign_checkpoint(session, KEY)
    from_file = sign_checkpoint(path, KEY)
    assert (live.line, live.digest, live.session_id) == (from_file.line, from_file.digest, from_file.session_id)
    assert live.line == session.version
    session.append_message(kit.user("and another"))
    report = verify(path, key=KEY, checkpoints=[live])
    assert report.ok and report.checkpoints == 1
    assert report.unverified_from == live.line + 1 and report.unverified_lines == 1
    assert not any("after the last signed checkpoint" in w.message for w in report.warnings)


def test_a_checkpoint_signed_with_another_key_or_edited_is_rejected(tmp_path: Path) -> None:
    """A wrong key, an edited checkpoint or one of another session are problems, not passes."""
    path = make_file(tmp_path)
    checkpoint = sign_checkpoint(path, KEY)
    import attrs

    cases = {
        "does not verify": (b"x" * 32, checkpoint),
        "does not verify ": (KEY, attrs.evolve(checkpoint, line=3)),
    }
    for expected, (key, cp) in cases.items():
        report = verify(path, key=key, checkpoints=[cp])
        assert not report.ok and expected.strip() in report.problems[0].message
    theirs = Session(JsonlSessionStorage.create(tmp_path / "other.jsonl"))
    report = verify(path, key=KEY, checkpoints=[sign_checkpoint(theirs, KEY)])
    assert not report.ok and "is for session" in report.problems[0].message


def test_a_key_without_checkpoints_is_a_problem(tmp_path: Path) -> None:
    """Asking for signed evidence that is not there fails (an attacker may delete the sidecar)."""
    report = verify(make_file(tmp_path), key=KEY)
    assert not report.ok and "no signed checkpoint" in report.problems[0].message


def test_checkpoints_kept_beside_the_file(tmp_path: Path) -> None:
    """The sidecar holds one JSON checkpoint a line, private; verify reads it when given the key."""
    path = make_file(tmp_path)
    first = sign_checkpoint(path, KEY, key_id="ops-2026")
    where = save_checkpoint(path, first)
    assert where == Path(str(path) + ".checkpoints") and (where.stat().st_mode & 0o777) == 0o600
    assert load_checkpoints(path) == [first] and Checkpoint.from_json(first.to_json()) == first
    assert verify(path, key=KEY).checkpoints == 1
    where.write_text("not json\n")
    with pytest.raises(SessionError) as caught:
        verify(path, key=KEY)
    assert caught.value.code == "corrupt" and caught.value.line == 1


def test_bad_keys_are_refused_clearly(tmp_path: Path) -> None:
    """Short HMAC keys, str keys and other objects are refused before anything is signed."""
    path = make_file(tmp_path)
    with pytest.raises(ValueError, match="at least 16 bytes"):
        sign_checkpoint(path, b"short")
    with pytest.raises(TypeError, match="bytes, not str"):
        sign_checkpoint(path, "a password")
    with pytest.raises(TypeError):
        sign_checkpoint(path, 12345)
    with pytest.raises(ValueError, match="needs the key"):
        verify(path, checkpoints=[sign_checkpoint(path, KEY)])


def test_a_damaged_or_unchained_log_cannot_be_signed(tmp_path: Path) -> None:
    """sign_checkpoint on a path refuses what does not verify or has no chain."""
    lines, _ = altered(lines_of(make_file(tmp_path)))
    with pytest.raises(SessionError) as caught:
        sign_checkpoint(write(tmp_path / "bad.jsonl", lines), KEY)
    assert caught.value.code == "corrupt" and "does not verify" in caught.value.message
    plain = write(tmp_path / "plain.jsonl", [chain.strip(line) for line in lines_of(tmp_path / "s.jsonl")])
    with pytest.raises(SessionError, match="not hash-chained"):
        sign_checkpoint(plain, KEY)


def test_ed25519_checkpoints_verify_with_the_public_key_only(tmp_path: Path) -> None:
    """An Ed25519 writer signs; a verifier with the public key checks; the public key cannot sign."""
    ed25519 = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.ed25519")
    private = ed25519.Ed25519PrivateKey.generate()
    path = make_file(tmp_path)
    checkpoint = sign_checkpoint(path, private)
    assert checkpoint.algorithm == "ed25519" and len(checkpoint.signature) == 128
    assert verify(path, key=private.public_key(), checkpoints=[checkpoint]).checkpoints == 1
    other = ed25519.Ed25519PrivateKey.generate().public_key()
    assert not verify(path, key=other, checkpoints=[checkpoint]).ok
    assert not verify(path, key=KEY, checkpoints=[checkpoint]).ok  # an HMAC key for an Ed25519 checkpoint
    with pytest.raises(TypeError, match="private key"):
        sign_checkpoint(path, private.public_key())
