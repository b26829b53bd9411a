"""The sidecar index of a JSONL session: used when it matches the file, never trusted over it.

Each state an index can be in (valid, stale after another writer appended, truncated, corrupted, missing) and each
damage to the file under it must give exactly what a full scan of the file gives, or the same error.
"""

from __future__ import annotations

import os
import stat
import warnings
from pathlib import Path
from typing import Any

import pytest
import sessiontree_strategies as strat
import sessiontree_testkit as kit
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiontree import JsonlSessionStorage, Session, SessionError
from sessiontree.pi.pi import pi_codec
from sessiontree.storage import jsonl_index
from sessiontree.storage.folders import MARKER, claim

STATES = ("valid", "stale", "index_truncated", "index_corrupted", "missing", "file_truncated", "file_corrupted")
# "missing" opens through the chunked scan of a mapped file; the reference reads the file whole, as before indexes
HOUR_NS = 3600 * 10**9


def _apply(session: Session, ops: list[Any]) -> None:
    pi = session.storage.codec.dialect.name == "pi"
    for op in ops:
        if pi and op[0] == "compaction" and op[2] == "tail":  # pi files refuse a retained tail (docs/pi.md)
            op = (*op[:2], "kept", *op[3:])
        strat.apply_operation(session, op)


def _write_session(path: Path, ops: list[Any], *, pi: bool = False) -> None:
    storage = JsonlSessionStorage.create(path, cwd="/p", codec=pi_codec() if pi else None)
    _apply(Session(storage), ops)
    storage.close()


def _age(path: Path) -> None:
    """Date the file an hour back, as a session written earlier is (a fresh one is not trusted: ``settled``)."""
    st_ = path.stat()
    os.utime(path, ns=(st_.st_atime_ns - HOUR_NS, st_.st_mtime_ns - HOUR_NS))


def _outcome(path: Path) -> tuple[Any, ...]:
    """What opening ``path`` gives: everything derived from it, or the error; and the warnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            storage = JsonlSessionStorage.open(path)
        except SessionError as exc:
            return ("refused at open", exc.code, str(exc)), ()
        try:
            result: Any = kit.snapshot(Session(storage))
        except SessionError as exc:
            result = ("refused", exc.code, str(exc))
        finally:
            storage.close()
    return result, tuple(str(w.message) for w in caught)


def _damage(path: Path, index: str, state: str, data: st.DataObject, more: list[Any]) -> None:
    if state == "stale":
        session = Session(JsonlSessionStorage.open(path))
        _apply(session, more)
        session.storage.close()
    elif state in ("index_truncated", "index_corrupted", "missing"):
        blob = Path(index).read_bytes()
        if state == "missing":
            blob = b""
        elif state == "index_truncated":
            blob = blob[: data.draw(st.integers(0, len(blob) - 1), label="cut")]
        else:
            at = data.draw(st.integers(0, len(blob) - 1), label="at")
            blob = blob[:at] + data.draw(st.binary(min_size=1, max_size=8), label="bytes") + blob[at + 8 :]
        Path(index).write_bytes(blob)
    else:
        blob = path.read_bytes()
        at = data.draw(st.integers(0, len(blob) - 1), label="at")
        if state == "file_truncated":
            blob = blob[:at]
        else:
            noise = data.draw(st.binary(min_size=1, max_size=4), label="bytes")
            blob = blob[:at] + noise + blob[at + len(noise) :]
        with open(path, "r+b") as fh:  # in place, as a damaged disk or an editor saving over it would
            fh.write(blob)
            fh.truncate(len(blob))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=strat.operations(14), more=strat.operations(6), state=st.sampled_from(STATES), pi=st.booleans(),
       data=st.data())
def test_every_state_of_the_index_gives_what_a_full_scan_gives(
    tmp_path_factory: pytest.TempPathFactory, ops: list[Any], more: list[Any], state: str, pi: bool, data: st.DataObject
) -> None:
    """Valid, stale, truncated, corrupted or missing, and with the file truncated or overwritten in place under it, an
    index gives exactly what a scan of the file without one gives (entries, context, stats, warnings) or the same error."""
    path = tmp_path_factory.mktemp("index") / "s.jsonl"
    _write_session(path, ops, pi=pi)
    _age(path)
    JsonlSessionStorage.open(path).load()  # writes the index
    index = jsonl_index.sidecar_path(path)
    assert index is not None and os.path.exists(index)
    _damage(path, index, state, data, more)
    with_index = _outcome(path)
    jsonl_index.remove(path)
    with pytest.MonkeyPatch.context() as patch:  # the reference: the whole file read, then checked, no index
        patch.setattr(jsonl_index, "scan_mapped", lambda storage: None)
        patch.setattr(jsonl_index, "sidecar_path", lambda path: None)
        assert _outcome(path) == with_index


def test_a_valid_index_reads_no_line_and_a_stale_one_only_the_new_lines(tmp_path: Path) -> None:
    """With the index matching the file nothing is read; after another writer appended, only what it appended."""
    path = tmp_path / "s.jsonl"
    _write_session(path, [("user", "hello"), ("assistant", "hi", False, 10), ("label", 0, "start")])
    _age(path)
    JsonlSessionStorage.open(path).load()
    storage = JsonlSessionStorage.open(path)
    opened = storage.bytes_read  # the header, read at open
    storage.load()
    assert storage.bytes_read == opened
    size = path.stat().st_size
    Session(JsonlSessionStorage.open(path)).append_message(kit.user("more"))
    storage = JsonlSessionStorage.open(path)
    opened = storage.bytes_read
    session = Session(storage)
    assert storage.bytes_read - opened == path.stat().st_size - size
    assert kit.said(session.build_context().messages)[-1] == "user:more"
    assert session.get_label(session.get_entries()[0].id) == "start"


def test_an_index_of_a_file_changed_just_before_it_was_written_is_not_trusted(tmp_path: Path) -> None:
    """A file modified within the file system's clock tick of its index may have changed without a new time: rescanned."""
    path = tmp_path / "s.jsonl"
    _write_session(path, [("user", "hello")])
    JsonlSessionStorage.open(path).load()
    storage = JsonlSessionStorage.open(path)
    opened = storage.bytes_read
    storage.load()
    assert storage.bytes_read - opened == path.stat().st_size


def test_where_the_index_lives(tmp_path: Path) -> None:
    """Beside the session in our repositories; in the cache directory for any other folder (pi's); private."""
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    ours.mkdir()
    theirs.mkdir()
    claim(ours)
    for folder in (ours, theirs):
        _write_session(folder / "s.jsonl", [("user", "hi")])
        JsonlSessionStorage.open(folder / "s.jsonl").load()
    assert (ours / ".s.jsonl.idx").exists()
    assert sorted(p.name for p in theirs.iterdir()) == ["s.jsonl"]
    cached = jsonl_index.sidecar_path(theirs / "s.jsonl")
    assert cached is not None and cached.startswith(os.environ["XDG_CACHE_HOME"])
    for index in (ours / ".s.jsonl.idx", Path(cached)):
        assert stat.S_IMODE(index.stat().st_mode) == 0o600
    assert (ours / MARKER).exists()


def test_an_entry_changed_in_place_under_a_trusted_index_is_refused_not_misread(tmp_path: Path) -> None:
    """An id that is not where the index says (the file rewritten in place, its size and time kept) is an error."""
    path = tmp_path / "s.jsonl"
    _write_session(path, [("user", "one"), ("user", "two"), ("user", "three")])
    _age(path)
    JsonlSessionStorage.open(path).load()
    lines = path.read_bytes().split(b"\n")
    first, second = (Session(JsonlSessionStorage.open(path)).get_entries()[i].id for i in (0, 1))
    lines[2] = lines[2].replace(second.encode(), first[::-1].encode())  # a different id, same length
    mtime = path.stat().st_mtime_ns
    with open(path, "r+b") as fh:
        fh.write(b"\n".join(lines))
    os.utime(path, ns=(mtime, mtime))
    with pytest.raises(SessionError, match="changed in place") as caught:
        Session(JsonlSessionStorage.open(path)).get_entries()
    assert caught.value.code == "corrupt"
    assert not os.path.exists(str(jsonl_index.sidecar_path(path)))


def test_deleting_a_session_removes_its_index(tmp_path: Path) -> None:
    """A repository's delete takes the session's index with it."""
    from sessiontree import JsonlSessionRepo

    repo = JsonlSessionRepo(tmp_path / "repo")
    session = repo.create(cwd="/p")
    session.append_message(kit.user("hi"))
    path = Path(session.storage.location)
    repo.open(session.id).build_context()
    assert (path.parent / f".{path.name}.idx").exists()
    repo.delete(session.id)
    assert not (path.parent / f".{path.name}.idx").exists()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_an_appender_and_an_opener_never_see_a_half_written_index(tmp_path: Path) -> None:
    """One process appends and reopens (rewriting the index each time) while another reads the index and opens the
    session: every index read is whole and sound, and every open sees a consistent, growing session."""
    from sessiontree_faults import drain, fork

    path = tmp_path / "s.jsonl"
    _write_session(path, [("user", "x" * 2000)] * 200)
    JsonlSessionStorage.open(path).load()
    where = jsonl_index.sidecar_path(path)
    assert where is not None

    def append_and_reopen(ack: int) -> None:
        for _ in range(60):
            session = Session(JsonlSessionStorage.open(path))  # extends and rewrites the index
            session.append_message(kit.user("y" * 1000))
            session.storage.close()
        os.write(ack, b"done\n")

    pid, read_fd = fork(append_and_reopen)
    seen, reads = 0, 0
    while os.waitpid(pid, os.WNOHANG) == (0, 0):
        blob = Path(where).read_bytes()
        assert jsonl_index.decode(blob) is not None
        reads += 1
        session = Session(JsonlSessionStorage.open(path))
        count = len(session.get_entries())
        assert count >= seen and session.build_context().messages[-1].role == "user"
        seen = count
    lines = drain(read_fd)
    assert lines == ["done"]
    assert reads > 0
    assert len(Session(JsonlSessionStorage.open(path)).get_entries()) == 260


@pytest.mark.parametrize("indexed", [False, True])
def test_a_mapped_session_and_another_writer_append_in_turn(tmp_path: Path, indexed: bool) -> None:
    """The mapping has a descriptor of its own: a storage reading through it and another writer append in turn."""
    path = tmp_path / "s.jsonl"
    _write_session(path, [("user", "one")])
    _age(path)
    if indexed:
        JsonlSessionStorage.open(path).load()
    first = Session(JsonlSessionStorage.open(path))
    first.append_message(kit.user("two"))
    second = Session(JsonlSessionStorage.open(path))
    second.append_message(kit.user("three"))
    assert kit.said(second.build_context().messages) == ["user:one", "user:two", "user:three"]
    first.append_message(kit.user("four"))
    assert kit.said(first.build_context().messages) == ["user:one", "user:two", "user:four"]
    first.storage.close()


@pytest.mark.parametrize("key", ["labels", "leaf_moves", "names", "kinds", "lines", "size"])
def test_an_index_that_contradicts_itself_is_ignored_even_when_its_digest_matches(tmp_path: Path, key: str) -> None:
    """An index whose metadata disagrees with its arrays (resealed, so its own digest holds) is never used."""
    import hashlib
    import struct

    import orjson

    path = tmp_path / "s.jsonl"
    _write_session(path, [("user", "one"), ("label", 0, "start"), ("name", "first"), ("move", 0, None)])
    JsonlSessionStorage.open(path).load()
    where = str(jsonl_index.sidecar_path(path))
    blob = Path(where).read_bytes()
    assert jsonl_index.decode(blob) is not None
    start = len(jsonl_index.MAGIC)
    (length,) = struct.unpack_from("<Q", blob, start)
    meta = orjson.loads(blob[start + 8 : start + 8 + length])
    meta[key] = [0, 1] if isinstance(meta[key], list) and key != "kinds" else (meta[key][::-1] if key == "kinds" else meta[key] + 1)
    head = orjson.dumps(meta)
    body = blob[:start] + struct.pack("<Q", len(head)) + head + blob[start + 8 + length : -32]
    assert jsonl_index.decode(body + hashlib.sha256(body).digest()) is None


@pytest.mark.parametrize("ids", [["a", 1], ["a", None], "ab", {"a": 1}])
def test_an_index_whose_ids_are_not_strings_is_ignored(tmp_path: Path, ids: Any) -> None:
    """The ids (the JSON at the end of the arrays) must be one string per entry, even in a resealed index."""
    import hashlib

    import orjson

    path = tmp_path / "s.jsonl"
    _write_session(path, [("user", "one"), ("user", "two")])
    JsonlSessionStorage.open(path).load()
    blob = Path(str(jsonl_index.sidecar_path(path))).read_bytes()
    index = jsonl_index.decode(blob)
    assert index is not None and len(index.ids) == 2
    written = orjson.dumps(index.ids)
    arrays = blob[:-32]
    assert arrays.endswith(written)

    def sealed(ids_json: bytes) -> bytes:
        body = arrays[: -len(written)] + ids_json
        return body + hashlib.sha256(body).digest()

    assert jsonl_index.decode(sealed(written)) is not None  # resealing alone changes nothing
    assert jsonl_index.decode(sealed(orjson.dumps(ids))) is None
