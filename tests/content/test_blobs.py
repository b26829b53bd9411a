"""Content out of line (docs/file-format.md, *Content out of line*): images and long text kept once in a blob store,
the line holding a reference that the hash chain seals. The storage contract and the repository tests run with it
too (the ``+blobs`` backends in conftest.py); this file holds what is particular to it."""

from __future__ import annotations

import base64
import hashlib
import os
import stat
from pathlib import Path
from typing import Any

import orjson
import pytest
import sessiontree_strategies as strat
import sessiontree_testkit as kit
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sessiontree import JsonlSessionRepo, SessionError, open_repo, verify
from sessiontree.content import blobs
from sessiontree.content.blob_stores import MemoryBlobs
from sessiontree.domain.events import CustomMessageAppended, MessageAppended
from sessiontree.domain.messages import (
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolResultMessage,
    UserMessage,
)
from sessiontree.wire.codec import native_codec

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


def test_a_copy_carries_its_blobs_and_export_to_pi_inlines_them(tmp_path: Path) -> None:
    from sessiontree.pi.pi_convert import convert

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
    from sessiontree.pi.pi import pi_codec

    return pi_codec()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(event=strat.entry_events(), threshold=st.sampled_from([0, 1, 8, 64]), image=st.binary(max_size=40))
@example(  # a float of 1e16 or more: outline wrote it again as 1e+16, the codec writes 1e16
    event=CustomMessageAppended(originator_id=kit.SESSION_ID, originator_version=2, timestamp="2000-11-29T11:30:00.000Z",
                                id="a", parent_id=None, extra={}, custom_type="a", content="0", details=1e16, display=False),
    threshold=0, image=b"",
)
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
