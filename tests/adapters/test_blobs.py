"""Content out of line (docs/file-format.md, *Content out of line*): images and long text kept once in a blob store,
the line holding a reference that the hash chain seals. The storage contract and the repository tests run with it
too (the ``+blobs`` backends in conftest.py); this file holds what is particular to it."""

from __future__ import annotations

import base64
import hashlib
import os
import stat
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
import sessiontree_strategies as strat
import sessiontree_testkit as kit
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiontree import JsonlSessionRepo, SessionError, open_repo, verify
from sessiontree.adapters import blobs
from sessiontree.adapters.blob_stores import FolderBlobs, MemoryBlobs
from sessiontree.adapters.codec import native_codec
from sessiontree.domain.events import MessageAppended
from sessiontree.domain.messages import (
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolResultMessage,
    UserMessage,
)

MB = 1 << 20


def _image(size: int = MB, seed: bytes = b"") -> str:
    return base64.b64encode((seed + os.urandom(size))[:size]).decode("ascii")


def _disk_usage(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _file(repo: Any, session: Any) -> Path:
    return Path(repo.path_for(session.id))


def test_fifty_appends_of_one_image_take_one_copy(tmp_path: Path) -> None:
    """The issue's target: 50 appends of the same 1 MB image take at most 3 MB on disk (it is stored once)."""
    repo = JsonlSessionRepo(tmp_path / "repo")
    session = repo.create()
    image = _image()
    for n in range(50):
        session.append_message(UserMessage([TextContent(f"screenshot {n}"), ImageContent(image, "image/png")]))
    session.close()
    assert _disk_usage(tmp_path / "repo") <= 3 * MB
    assert len(list(repo.store.blobs.digests())) == 1
    again = repo.open(session.id)
    assert all(m.content[1].data == image for m in again.build_context().messages)


def test_every_kind_of_content_comes_back_as_it_was(tmp_path: Path) -> None:
    """Images (kept as the image's bytes), non-canonical base64 (kept as text), long text, thinking, string content of
    user and custom messages and tool output all read back equal, and the file holds none of them."""
    repo = JsonlSessionRepo(tmp_path, blob_threshold=1024)
    session = repo.create()
    long = "long text é " * 500
    odd = "aGVsbG8=\n"  # not what encoding its bytes gives back: kept as text, byte for byte
    messages = [
        UserMessage([TextContent(long), ImageContent(_image(3000), "image/png"), ImageContent(odd, "image/gif")]),
        UserMessage(long + "!"),
        kit.assistant("short"),
        ToolResultMessage(tool_call_id="c1", tool_name="bash", content=(TextContent(long + "?"),)),
    ]
    ids = [session.append_message(m) for m in messages]
    ids.append(session.append_custom_message_entry("note", long + "#", display=True))
    thinking = session.append_message(
        kit.assistant("ok").__class__(content=(ThinkingContent(long + "~"), TextContent("done")))
    )
    session.close()
    raw = _file(repo, session).read_bytes()
    assert long[: blobs.PREVIEW + 10].encode() not in raw and b"aGVsbG8" not in raw  # only a preview of each text
    again = repo.open(session.id)
    for entry_id, message in zip(ids, messages, strict=False):
        assert again.entry(entry_id).message == message
    assert again.entry(ids[-1]).content == long + "#"
    assert again.entry(thinking).message.content[0].thinking == long + "~"
    image_refs = [ref for line in raw.split(b"\n") for ref in blobs.refs(line) if ref["media_type"] == "image/png"]
    assert image_refs and image_refs[0]["encoding"] == "base64"
    stored = repo.store.blobs.get(image_refs[0]["sha256"])
    assert base64.b64encode(stored).decode() == messages[0].content[1].data  # the blob is the image itself
    assert verify(_file(repo, session)).ok


def test_short_text_stays_inline_and_none_keeps_everything_inline(tmp_path: Path) -> None:
    repo = JsonlSessionRepo(tmp_path / "a")
    session = repo.create()
    session.append_message(kit.user("x" * 1000))
    assert b"x" * 1000 in _file(repo, session).read_bytes()
    inline = JsonlSessionRepo(tmp_path / "b", blob_threshold=None)
    other = inline.create()
    image = _image(2000)
    other.append_message(UserMessage([ImageContent(image, "image/png"), TextContent("y" * 100_000)]))
    assert image.encode() in _file(inline, other).read_bytes()
    assert not (tmp_path / "b" / ".blobs").exists()
    with pytest.raises(ValueError, match="blob_threshold"):
        JsonlSessionRepo(tmp_path / "c", blob_threshold=-1)


def test_verify_checks_every_blob_and_names_the_line(tmp_path: Path) -> None:
    """verify reads each blob once and checks it against its digest; a missing or altered blob fails the lines that
    refer to it; a reference changed in the line breaks the chain."""
    repo = JsonlSessionRepo(tmp_path)
    session = repo.create()
    image = _image(5000)
    session.append_message(UserMessage([ImageContent(image, "image/png")]))
    session.append_message(kit.user("between"))
    session.append_message(UserMessage([ImageContent(image, "image/png")]))
    session.close()
    path = _file(repo, session)
    report = verify(path)
    assert report.ok and report.blobs == 1 and "1 blob(s) match" in report.summary()
    (digest,) = repo.store.blobs.digests()
    blob = repo.store.blobs.path(digest)
    original = blob.read_bytes()
    blob.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
    report = verify(path)
    assert not report.ok and [p.line for p in report.problems] == [2, 4]
    assert "does not match its digest" in report.problems[0].message
    blob.unlink()
    report = verify(path)
    assert [p.line for p in report.problems] == [2, 4] and "is missing" in report.problems[0].message
    blob.write_bytes(original)
    lines = path.read_bytes().split(b"\n")
    lines[1] = lines[1].replace(b'"size":', b'"size":1', 1)  # the reference itself altered
    path.write_bytes(b"\n".join(lines))
    report = verify(path)
    assert not report.ok and report.first_bad_line == 2


def test_a_missing_blob_is_named_when_its_entry_is_read(tmp_path: Path) -> None:
    repo = JsonlSessionRepo(tmp_path)
    session = repo.create()
    image_id = session.append_message(UserMessage([ImageContent(_image(5000), "image/png")]))
    text_id = session.append_message(kit.user("still readable"))
    session.close()
    for digest in list(repo.store.blobs.digests()):
        repo.store.blobs.delete(digest)
    again = repo.open(session.id)  # opening reads no content
    assert again.entry(text_id).message == kit.user("still readable")
    with pytest.raises(SessionError) as caught:
        again.entry(image_id)
    assert caught.value.code == "corrupt" and caught.value.line == 2 and "is missing" in caught.value.message


def test_the_blob_folder_is_private(tmp_path: Path) -> None:
    repo = JsonlSessionRepo(tmp_path)
    session = repo.create()
    session.append_message(UserMessage([ImageContent(_image(100), "image/png")]))
    (digest,) = repo.store.blobs.digests()
    path = repo.store.blobs.path(digest)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
    assert [s.id for s in repo.list()] == [session.id]  # the folder is not taken for sessions


@pytest.mark.parametrize("url", ["jsonl", "sqlite", "memory", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_erasure_deletes_blobs_no_other_entry_refers_to(url: str, tmp_path: Path) -> None:
    """``redact`` removes the erased entry's blobs, unless another entry (here, of another session) refers to them;
    verify passes after each erasure and the content is gone from the store."""
    import sessiontree_pg as pg

    with pg.temp_schema("blobs") if url == "postgres" else _nothing() as schema:
        repo = open_repo({"jsonl": f"jsonl:{tmp_path / 'r'}", "sqlite": f"sqlite:{tmp_path / 'r.db'}", "memory": "memory:",
                          "postgres": pg.url(schema or "")}[url])
        try:
            shared, own = _image(3000), _image(3000)
            first = repo.create()
            keep = first.append_message(UserMessage([ImageContent(shared, "image/png"), ImageContent(own, "image/png")]))
            second = repo.create()
            second.append_message(UserMessage([ImageContent(shared, "image/png")]))
            assert len(list(repo.store.blobs.digests())) == 2
            first.redact(keep, reason="asked")
            left = list(repo.store.blobs.digests())
            assert left == [hashlib.sha256(base64.b64decode(shared)).hexdigest()]
            assert verify(first).ok and verify(second).ok
            assert verify(first).redactions and second.build_context().messages[0].content[0].data == shared
        finally:
            repo.close()


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def test_a_copy_carries_its_blobs_and_export_to_pi_inlines_them(tmp_path: Path) -> None:
    from sessiontree.adapters.pi_convert import convert

    source = JsonlSessionRepo(tmp_path / "a")
    session = source.create()
    image = _image(4000)
    session.append_message(UserMessage([ImageContent(image, "image/png")]))
    session.close()
    target = JsonlSessionRepo(tmp_path / "b")
    copy = target.copy_from(source, session.id)
    assert _file(target, copy).read_bytes() == _file(source, session).read_bytes()  # byte for byte, chain included
    assert list(target.store.blobs.digests()) == list(source.store.blobs.digests())
    assert verify(_file(target, copy)).ok
    out = tmp_path / "pi.jsonl"
    convert(_file(source, session), out, _pi_codec())
    assert image.encode() in out.read_bytes() and b"$blob" not in out.read_bytes()


def _pi_codec() -> Any:
    from sessiontree.adapters.pi import pi_codec

    return pi_codec()


def test_a_writer_holding_the_folder_keeps_collection_waiting(tmp_path: Path) -> None:
    """A blob put for a line is not collected before the line is written: collecting waits for writers."""
    store = FolderBlobs(tmp_path / ".blobs")
    store.put("a" * 64, b"x")
    done = threading.Event()
    with store.writing():
        worker = threading.Thread(target=lambda: (store.collect(["a" * 64], lambda d: False), done.set()))
        worker.start()
        time.sleep(0.2)
        assert not done.is_set()
    worker.join(5)
    assert done.is_set() and store.get("a" * 64) is None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(event=strat.entry_events(), threshold=st.sampled_from([0, 1, 8, 64]), image=st.binary(max_size=40))
def test_inline_gives_back_what_outline_took(event: Any, threshold: int, image: bytes) -> None:
    """For any entry line, outlining then inlining is the identity, and the outlined line holds no long text."""
    codec = native_codec()
    line = codec.encode_event(event)
    store = MemoryBlobs(threshold)
    outlined = blobs.outline(line, store)
    assert blobs.inline(outlined, store) == line
    for holder, key, mime in blobs.slots(orjson.loads(outlined)):
        value = holder[key]
        assert not isinstance(value, str) or (mime is None and len(value.encode()) <= threshold)
    message = UserMessage([ImageContent(base64.b64encode(image).decode(), "image/png")])
    image_line = codec.encode_event(MessageAppended(originator_id=kit.SESSION_ID, originator_version=2,
                                                    timestamp=kit.T0_ISO, id="abcd0123", parent_id=None, message=message))
    assert blobs.inline(blobs.outline(image_line, store), store) == image_line


@pytest.mark.parametrize("url", ["jsonl", "sqlite"])
def test_search_finds_words_of_text_kept_out_of_line(url: str, tmp_path: Path) -> None:
    repo = open_repo(f"jsonl:{tmp_path / 'r'}" if url == "jsonl" else f"sqlite:{tmp_path / 'r.db'}", blob_threshold=64)
    try:
        session = repo.create()
        entry = session.append_message(kit.user("filler words " * 20 + "zanzibar"))
        assert b"zanzibar" not in b"".join(session.storage.read_lines())
        hits = repo.search("zanzibar")
        assert [h.entry_id for h in hits] == [entry]
    finally:
        repo.close()


@pytest.mark.parametrize("url", ["jsonl", "sqlite", "memory"])
def test_a_listing_quotes_a_first_message_kept_out_of_line(url: str, tmp_path: Path) -> None:
    """The reference of a text keeps its first characters, so listings need not read the store."""
    where = {"jsonl": f"jsonl:{tmp_path / 'r'}", "sqlite": f"sqlite:{tmp_path / 'r.db'}", "memory": "memory:"}[url]
    with open_repo(where, blob_threshold=16) as repo:
        session = repo.create()
        session.append_message(kit.user("a first question that is longer than the threshold " * 10))
        assert b"a first question" not in b"".join(session.storage.read_lines()[1:])[:60]
        (info,) = repo.list()
        assert info.first_message.startswith("a first question that is longer")
        assert len(info.first_message) == blobs.PREVIEW


@settings(max_examples=300, deadline=None)
@given(raw=st.binary(max_size=40), text=st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=\n ", max_size=14))
def test_an_image_is_kept_as_its_bytes_only_when_they_give_its_text_back(raw: bytes, text: str) -> None:
    """Base64 as encoders write it is stored decoded; any other text (bad padding, stray bits, whitespace) as text,
    so what is read back is always the very string that was appended."""
    canonical = base64.b64encode(raw).decode()
    assert blobs.packed(canonical, "image/png") == (raw, {**blobs.packed(canonical, "image/png")[1], "encoding": "base64"})
    data, ref = blobs.packed(text, "image/png")
    assert blobs.unpacked(data, ref) == text
    try:
        canonical_text = base64.b64encode(base64.b64decode(text, validate=True)).decode() == text
    except ValueError:
        canonical_text = False
    assert (ref.get("encoding") == "base64") == canonical_text


@pytest.mark.parametrize("url", ["sqlite", "memory", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_blob_collected_while_its_line_is_written_is_put_again(url: str, tmp_path: Path) -> None:
    """A collector that runs after a database writer put a blob but before its line is stored deletes the blob (no
    line names it yet); the writer puts it again once the line is stored, so nothing refers to a missing blob."""
    import sessiontree_pg as pg

    from sessiontree.adapters.blob_gc import collect

    with pg.temp_schema("blobgc") if url == "postgres" else _nothing() as schema:
        where = {"sqlite": f"sqlite:{tmp_path / 'r.db'}", "memory": "memory:", "postgres": pg.url(schema or "")}[url]
        with open_repo(where) as repo:
            session = repo.create()
            recorder = session.storage.recorder  # type: ignore[attr-defined]
            insert = recorder.insert_events
            collected: list[str] = []

            def insert_after_a_collection(stored: Any, **kwargs: Any) -> Any:
                collected.extend(collect(repo.store.blobs, recorder, list(repo.store.blobs.digests())))
                return insert(stored, **kwargs)

            recorder.insert_events = insert_after_a_collection
            image = _image(2000)
            entry = session.append_message(UserMessage([ImageContent(image, "image/png")]))
            recorder.insert_events = insert
            assert collected  # the blob was taken between its put and the line
            assert repo.open(session.id).entry(entry).message.content[0].data == image
            assert verify(session).ok



def test_a_collector_waits_for_the_line_that_refers_to_a_blob_just_put(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Right after a writer puts a blob, another thread collects it: it waits until the writer's line is written,
    then sees the line and keeps the blob (without the folder's lock it would delete a blob about to be named)."""
    from sessiontree.adapters.blob_gc import collect

    repo = JsonlSessionRepo(tmp_path)
    session = repo.create()
    store = repo.store.blobs
    put, finished = store.put, threading.Event()
    collectors: list[threading.Thread] = []

    def put_then_collect(digest: str, data: bytes) -> None:
        put(digest, data)
        worker = threading.Thread(target=lambda: (collect(store, tmp_path, [digest]), finished.set()))
        worker.start()
        collectors.append(worker)
        finished.wait(0.5)  # a collector not held back deletes the blob now, before the line is written

    monkeypatch.setattr(store, "put", put_then_collect)
    entry = session.append_message(UserMessage([ImageContent(_image(3000), "image/png")]))
    collectors[0].join(5)
    assert finished.is_set() and len(list(store.digests())) == 1
    assert verify(_file(repo, session)).ok and repo.open(session.id).entry(entry).message.content[0].data


@pytest.mark.parametrize("url", ["jsonl", "sqlite", "memory"])
def test_entries_that_refer_to_one_blob_share_its_string(url: str, tmp_path: Path) -> None:
    """A screenshot sent 20 times is read once when the session is read back: every message holds the same string
    object (its memory paid once), and each still equals what was appended."""
    where = {"jsonl": f"jsonl:{tmp_path / 'r'}", "sqlite": f"sqlite:{tmp_path / 'r.db'}", "memory": "memory:"}[url]
    with open_repo(where, blob_threshold=100) as repo:
        session = repo.create()
        image, text = _image(5000), "a long tool output " * 20
        for n in range(20):
            session.append_message(UserMessage([TextContent(f"step {n}"), ImageContent(image, "image/png")]))
            session.append_message(ToolResultMessage(tool_call_id=f"c{n}", tool_name="t", content=(TextContent(text),)))
        messages = repo.open(session.id).build_context().messages
        images = [m.content[1].data for m in messages[::2]]
        outputs = [m.content[0].text for m in messages[1::2]]
        assert images[0] == image and all(data is images[0] for data in images)
        assert outputs[0] == text and all(out is outputs[0] for out in outputs)


def test_integers_beyond_64_bits_survive_content_kept_out_of_line(tmp_path: Path) -> None:
    """A line is parsed again to put its content out of line and to read it back: its other values come back exact."""
    repo = JsonlSessionRepo(tmp_path, blob_threshold=0)
    session = repo.create()
    message = ToolResultMessage(tool_call_id="c", tool_name="t", content=(TextContent("some output"),),
                                details={"huge": -(2**63) - 1, "bigger": 2**70, "float": 0.1})
    entry = session.append_message(message)
    session.close()
    assert b"$blob" in _file(repo, session).read_bytes()
    assert repo.open(session.id).entry(entry).message == message
