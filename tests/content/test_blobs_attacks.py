"""Content out of line under attack: what a review found, each kept as a test (docs/file-format.md, *Content out of
line*; docs/audit.md)."""

from __future__ import annotations

import base64
import hashlib
import os
import threading
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest
import sessiontree_pg as pg
import sessiontree_testkit as kit

from sessiontree import (
    ImageContent,
    JsonlSessionRepo,
    SessionError,
    TextContent,
    UnknownMessage,
    UserMessage,
    open_repo,
    verify,
)
from sessiontree.content import blobs
from sessiontree.storage.jsonl import JsonlSessionStorage


def _image(size: int = 3000) -> str:
    return base64.b64encode(os.urandom(size)).decode("ascii")


def _with_image(repo: Any, image: str) -> tuple[Any, str]:
    session = repo.create()
    return session, session.append_message(UserMessage([TextContent("look"), ImageContent(image, "image/png")]))


def _blob_files(folder: Path) -> list[Path]:
    return [p for p in (folder / ".blobs").rglob("*") if p.is_file() and p.name != "lock"]


def test_an_archive_folder_must_not_be_a_repository(tmp_path: Path) -> None:
    """Archives keep their content in their folder's blob store; a repository's folder would collect it."""
    repo = JsonlSessionRepo(tmp_path / "r")
    _with_image(repo, _image())
    other = JsonlSessionRepo(tmp_path / "other")
    other.claim() if hasattr(other, "claim") else other.store.claim()
    for folder in (tmp_path / "r", tmp_path / "other"):
        with pytest.raises(SessionError, match="is a sessiontree repository"):
            repo.prune(older_than="0s", archive=folder, dry_run=True)
    assert len(_blob_files(tmp_path / "r")) == 1


@pytest.mark.parametrize("url", ["jsonl", "sqlite", "memory", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_copy_keeps_its_blobs_when_they_are_collected_while_it_is_stored(url: str, tmp_path: Path) -> None:
    """The target erases its only other entry naming the image while the copy is being stored: the copy keeps it."""
    image = _image()
    source = JsonlSessionRepo(tmp_path / "src")
    copied, _ = _with_image(source, image)
    with pg.temp_schema("blobcopy") if url == "postgres" else nullcontext() as schema, open_repo({
        "jsonl": f"jsonl:{tmp_path / 'dst'}", "sqlite": f"sqlite:{tmp_path / 'dst.db'}", "memory": "memory:",
        "postgres": pg.url(schema or ""),
    }[url]) as target:
        holder, entry = _with_image(target, image)
        store_lines = target.store.store_lines
        done: list[bool] = []

        def erase_first(session_id: str, lines: Any, *blobs: Any) -> Any:
            if not done:  # another writer's erasure at the worst moment (in a thread, so a lock it waits on is seen)
                worker = threading.Thread(target=lambda: holder.redact(entry, reason="test"))
                worker.start()
                worker.join(0.5)
                done.append(True)
            return store_lines(session_id, lines, *blobs)

        target.store.store_lines = erase_first  # type: ignore[method-assign]
        copy = target.copy_from(source, copied.id)
        target.store.store_lines = store_lines  # type: ignore[method-assign]
        assert target.open(copy.id).build_context().messages[0].content[1].data == image
        assert verify(copy).ok


@pytest.mark.parametrize("url", ["jsonl", "sqlite", "memory"])
def test_deleting_a_session_deletes_the_content_only_it_named(url: str, tmp_path: Path) -> None:
    where = {"jsonl": f"jsonl:{tmp_path / 'r'}", "sqlite": f"sqlite:{tmp_path / 'r.db'}", "memory": "memory:"}[url]
    with open_repo(where) as repo:
        shared, own = _image(), _image()
        first, _ = _with_image(repo, shared)
        first.append_message(UserMessage([ImageContent(own, "image/png")]))
        second, _ = _with_image(repo, shared)
        repo.delete(first.id)
        assert list(repo.store.blobs.digests()) == [hashlib.sha256(base64.b64decode(shared)).hexdigest()]
        repo.delete(second.id)
        assert list(repo.store.blobs.digests()) == []


def test_an_interrupted_erasure_deletes_its_blobs_when_redacted_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The record names the blobs the erasure deletes, so redacting again completes it even after the line was
    rewritten."""
    from sessiontree.audit import erasure

    repo = JsonlSessionRepo(tmp_path)
    session, entry = _with_image(repo, _image())

    def crash(*args: Any) -> None:
        raise KeyboardInterrupt  # the process stops between rewriting the line and deleting its content

    monkeypatch.setattr(erasure, "collect", crash)
    with pytest.raises(KeyboardInterrupt):
        session.redact(entry, reason="asked")
    monkeypatch.undo()
    assert len(_blob_files(tmp_path)) == 1
    again = repo.open(session.id)
    again.redact(entry, reason="asked")
    assert _blob_files(tmp_path) == [] and verify(again).ok


@pytest.mark.parametrize("kind", ["fifo", "directory", "larger"])
def test_a_blob_that_is_not_a_plain_file_of_its_size_is_corrupt_at_once(kind: str, tmp_path: Path) -> None:
    """A FIFO, a folder or a huge file in a blob's place: reading and verify say so, never hang or read it all."""
    repo = JsonlSessionRepo(tmp_path)
    session, entry = _with_image(repo, _image())
    session.close()
    (blob,) = _blob_files(tmp_path)
    blob.unlink()
    if kind == "fifo":
        os.mkfifo(blob)
    elif kind == "directory":
        blob.mkdir()
    else:
        with open(blob, "wb") as handle:
            handle.truncate(1 << 30)  # sparse: a gigabyte nobody should read to learn it is the wrong blob
    with pytest.raises(SessionError) as caught:
        repo.open(session.id).entry(entry)
    assert caught.value.code == "corrupt"
    report = verify(repo.path_for(session.id))
    assert report.first_bad_line == 2


def test_a_reference_edited_to_read_as_text_is_corrupt_and_salvage_skips_it(tmp_path: Path) -> None:
    repo = JsonlSessionRepo(tmp_path)
    session, entry = _with_image(repo, _image())
    later = session.append_message(kit.user("after"))
    session.close()
    path = Path(repo.path_for(session.id))
    path.write_bytes(path.read_bytes().replace(b',"encoding":"base64"', b"", 1))
    with pytest.raises(SessionError) as caught:
        repo.open(session.id).entry(entry)
    assert caught.value.code == "corrupt"
    salvaged = JsonlSessionStorage.open(path, salvage=True)
    assert [line for line, _ in salvaged.skipped] == [2, 3]  # the line, and its child
    assert later not in [e.id for e in salvaged.load()[1]]


def test_a_message_of_an_unknown_role_is_never_read_through_the_store(tmp_path: Path) -> None:
    """Another producer's message that happens to hold a reference-shaped value reads back exactly as written."""
    repo = JsonlSessionRepo(tmp_path, blob_threshold=0)
    session = repo.create()
    shaped = {"$blob": {"sha256": hashlib.sha256(b"").hexdigest(), "size": 0, "media_type": "text/plain"}}
    message = UnknownMessage(role="x", data={"content": shaped, "text": "y" * 100})
    entry = session.append_message(message)
    session.close()
    assert repo.open(session.id).entry(entry).message == message


def test_verify_checks_each_reference_to_a_blob_not_only_the_first(tmp_path: Path) -> None:
    """In a log without a chain (another producer's), a second reference to a blob with a wrong size is reported."""
    repo = JsonlSessionRepo(tmp_path)
    image = _image()
    session, _ = _with_image(repo, image)
    session.append_message(UserMessage([ImageContent(image, "image/png")]))
    session.close()
    path = Path(repo.path_for(session.id))
    lines = [line[: line.rindex(b',"chain"')] + b"}" for line in path.read_bytes().splitlines()]
    lines[2] = lines[2].replace(b'"size":3000', b'"size":2999')
    path.write_bytes(b"\n".join(lines) + b"\n")
    report = verify(path)
    assert [p.line for p in report.problems] == [3] and "2999" in report.problems[0].message


def test_a_damaged_blob_of_its_own_size_is_written_again_by_the_next_put(tmp_path: Path) -> None:
    """Bytes flipped in a blob file (its size kept) are found by verify, and the next writer of that content, which
    holds the true bytes, puts them back: nothing stays lost."""
    repo = JsonlSessionRepo(tmp_path)
    image = _image()
    first, entry = _with_image(repo, image)
    first.close()
    [held] = _blob_files(tmp_path)
    damaged = bytearray(held.read_bytes())
    damaged[100] ^= 0xFF
    held.write_bytes(bytes(damaged))
    path = Path(repo.path_for(first.id))
    assert [p.line for p in verify(path).problems] == [2]
    second, _ = _with_image(repo, image)
    second.close()
    assert held.read_bytes() == base64.b64decode(image) and not verify(path).problems
    with repo.open(first.id) as session:
        assert session.get_entry(entry).message.content[1].data == image


def test_a_blob_that_cannot_be_read_back_is_replaced_by_the_next_put(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A blob of the right size that a put cannot compare (swapped for a FIFO or a link after its ``lstat``, or not
    readable) is written again through a new file, not an error of the append."""
    from sessiontree.content.blob_stores import FolderBlobs

    repo = JsonlSessionRepo(tmp_path)
    image = _image()
    first, _ = _with_image(repo, image)
    first.close()
    [held] = _blob_files(tmp_path)
    held.write_bytes(bytes(len(held.read_bytes())))  # damaged, and unreadable below: replaced either way
    inode = held.stat().st_ino

    def unreadable(self: Any, digest: str, size: int | None = None) -> bytes | None:
        raise SessionError("corrupt", "not a regular file")

    monkeypatch.setattr(FolderBlobs, "get", unreadable)
    second, _ = _with_image(repo, image)
    second.close()
    monkeypatch.undo()
    assert held.read_bytes() == base64.b64decode(image) and held.stat().st_ino != inode


def test_a_session_in_a_sub_folder_follows_the_repository_threshold(tmp_path: Path) -> None:
    first = JsonlSessionRepo(tmp_path / "project")
    session = first.create()
    session.close()
    (tmp_path / "root").mkdir()
    os.rename(tmp_path / "project", tmp_path / "root" / "project")
    repo = JsonlSessionRepo(tmp_path / "root", blob_threshold=None)
    again = repo.open(session.id)
    image = _image(500)
    again.append_message(UserMessage([ImageContent(image, "image/png")]))
    assert image.encode() in Path(again.storage.location).read_bytes()


@pytest.mark.parametrize(("text", "expected"), [("64k", 64 << 10), ("1MiB", 1 << 20), ("0", 0), ("none", None)])
def test_the_environment_sets_the_default_threshold(text: str, expected: Any, monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    monkeypatch.setenv("SESSIONTREE_BLOB_THRESHOLD", text)
    assert JsonlSessionRepo(tmp_path).store.blobs.threshold == expected
    assert JsonlSessionRepo(tmp_path, blob_threshold=5).store.blobs.threshold == 5  # an explicit setting wins
    monkeypatch.setenv("SESSIONTREE_BLOB_THRESHOLD", "lots")
    with pytest.raises(SessionError, match="SESSIONTREE_BLOB_THRESHOLD"):
        JsonlSessionRepo(tmp_path)


@pytest.mark.postgres
def test_first_images_of_many_writers_on_a_new_postgres_schema(tmp_path: Path) -> None:
    """Writers that each put the first blob of a new schema at the same moment all succeed (the table's creation
    races are waited out)."""
    with pg.temp_schema("blobrace") as schema:
        repos = [open_repo(pg.url(schema)) for _ in range(4)]
        try:
            start, errors = threading.Barrier(4), []

            def write(repo: Any) -> None:
                session = repo.create()
                start.wait()
                try:
                    session.append_message(UserMessage([ImageContent(_image(), "image/png")]))
                except SessionError as exc:
                    errors.append(exc)

            threads = [threading.Thread(target=write, args=(r,)) for r in repos]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(30)
            assert errors == []
            assert len(list(repos[0].store.blobs.digests())) == 4
        finally:
            for repo in repos:
                repo.close()


def test_blob_references_are_only_where_our_writer_puts_them() -> None:
    assert blobs.is_digest("a" * 64) and not blobs.is_digest("A" * 64) and not blobs.is_digest("../" + "a" * 61)
