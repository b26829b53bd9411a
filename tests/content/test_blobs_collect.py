"""Content out of line, deleted: erasures collect the blobs no other entry names, and a collection never takes a blob
a writer is about to name (docs/file-format.md, *Content out of line*, *Deleting*)."""

from __future__ import annotations

import base64
import hashlib
import os
import threading
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest
import sessiontree_pg as pg

from sessiontree import JsonlSessionRepo, open_repo, verify
from sessiontree.content.blob_stores import FolderBlobs
from sessiontree.domain.messages import ImageContent, UserMessage


def _image(size: int) -> str:
    return base64.b64encode(os.urandom(size)).decode("ascii")


def _file(repo: Any, session: Any) -> Path:
    return Path(repo.path_for(session.id))


@pytest.mark.parametrize("url", ["jsonl", "sqlite", "memory", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_erasure_deletes_blobs_no_other_entry_refers_to(url: str, tmp_path: Path) -> None:
    """``redact`` removes the erased entry's blobs, unless another entry (here, of another session) refers to them;
    verify passes after each erasure and the content is gone from the store."""

    with pg.temp_schema("blobs") if url == "postgres" else nullcontext() as schema:
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


@pytest.mark.parametrize("url", ["sqlite", "memory", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_blob_collected_while_its_line_is_written_is_stored_with_it(url: str, tmp_path: Path) -> None:
    """Another session's erasure collects a blob after a writer's line was encoded but before it is stored (no line
    names the blob then); the writer stores the blob with its line (a database: in one transaction; memory: a second
    put), so nothing refers to a missing blob."""
    with pg.temp_schema("blobgc") if url == "postgres" else nullcontext() as schema:
        where = {"sqlite": f"sqlite:{tmp_path / 'r.db'}", "memory": "memory:", "postgres": pg.url(schema or "")}[url]
        with open_repo(where) as repo:
            image = _image(2000)
            holder = repo.create()
            held = holder.append_message(UserMessage([ImageContent(image, "image/png")]))
            session = repo.create()
            storage: Any = session.storage
            lines, left = storage.pipeline.lines, []  # encode -> outline: the lines before they are stored

            def sealed_then_collected(*args: Any, **kwargs: Any) -> Any:
                found = lines(*args, **kwargs)
                holder.redact(held, reason="test")
                left.append(list(repo.store.blobs.digests()))
                return found

            storage.pipeline.lines = sealed_then_collected
            entry = session.append_message(UserMessage([ImageContent(image, "image/png")]))
            storage.pipeline.lines = lines
            assert left == [[]]  # the blob was taken between encoding the line and storing it
            assert len(list(repo.store.blobs.digests())) == 1
            assert repo.open(session.id).entry(entry).message.content[0].data == image
            assert verify(session).ok


def test_a_collector_waits_for_the_line_that_refers_to_a_blob_just_put(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Right after a writer puts a blob, another thread collects it: it waits until the writer's line is written,
    then sees the line and keeps the blob (without the folder's lock it would delete a blob about to be named)."""
    from sessiontree.content.blob_stores import collect

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
