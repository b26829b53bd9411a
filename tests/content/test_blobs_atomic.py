"""A database writer stores its blobs in the transaction of the lines that name them, so no crash or interleaving
leaves a stored line naming a collected blob (docs/file-format.md, *Content out of line*, *Deleting*)."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import textwrap
import threading
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest
import sessiontree_pg as pg

from sessiontree import ImageContent, UserMessage, open_repo, verify
from sessiontree.content.blob_stores import digests_of

# The writer, in its own process: an image another session also holds is appended (or a session naming it copied in);
# between encoding the line and storing it, that other session erases its entry (collecting the image, which no
# stored line names yet); the writer dies the moment it puts a blob after that, i.e. after its line is stored (the
# old design's second put).
_WRITER = textwrap.dedent("""
    import base64, os, sys
    from sessiontree import ImageContent, JsonlSessionRepo, UserMessage, open_repo
    from sessiontree.content.blob_tables import TableBlobs

    url, image, how = sys.argv[1], open(sys.argv[2]).read(), sys.argv[3]
    repo = open_repo(url)
    holder = repo.create()
    entry = holder.append_message(UserMessage([ImageContent(image, "image/png")]))
    phase, put = [], TableBlobs.put

    def then_erased(write):
        def wrapped(*args, **kwargs):
            if not phase:
                found = write(*args, **kwargs) if how == "append" else None
                holder.redact(entry, reason="the other session's erasure, at the worst moment")
                phase.append("storing")
                if how == "append":
                    return found
            return write(*args, **kwargs)
        return wrapped

    def put_or_die(self, digest, data):
        if phase:
            os._exit(3)  # killed after its line is stored, before any later put
        return put(self, digest, data)

    TableBlobs.put = put_or_die
    if how == "append":
        writer = repo.create()
        print(writer.id, flush=True)
        writer.storage.pipeline.lines = then_erased(writer.storage.pipeline.lines)  # encode -> outline, before the store
        writer.append_message(UserMessage([ImageContent(image, "image/png")]))
    else:
        source = JsonlSessionRepo(sys.argv[4])
        original = source.create()
        original.append_message(UserMessage([ImageContent(image, "image/png")]))
        print(original.id, flush=True)
        repo.store.store_lines = then_erased(repo.store.store_lines)
        repo.copy_from(source, original.id)
    print("stored", flush=True)
""")


def _image(size: int = 3000) -> str:
    return base64.b64encode(os.urandom(size)).decode("ascii")


def _where(url: str, tmp_path: Path, schema: str | None) -> str:
    return pg.url(schema or "") if url == "postgres" else f"sqlite:{tmp_path / 'r.db'}"


def _missing(repo: Any) -> list[str]:
    """The digests named by a stored line of any session that the store does not hold."""
    held = set(repo.store.blobs.digests())
    named = [d for info in repo.list() for d in digests_of(repo.store.attach(info.id).read_lines())]
    return [d for d in named if d not in held]


@pytest.mark.parametrize("how", ["append", "copy"])
@pytest.mark.parametrize("url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_writer_killed_after_storing_its_line_never_leaves_it_naming_a_collected_blob(url: str, how: str,
                                                                                         tmp_path: Path) -> None:
    """The attack of the old design (put, store the line, put again): a collection between the put and the line, then
    the writer killed before its second put, left the line naming a missing blob. Blobs and line now commit together."""
    image = _image()
    (tmp_path / "image").write_text(image)
    with pg.temp_schema("blobkill") if url == "postgres" else nullcontext() as schema:
        where = _where(url, tmp_path, schema)
        run = subprocess.run([sys.executable, "-c", _WRITER, where, str(tmp_path / "image"), how, str(tmp_path / "src")],
                             capture_output=True, text=True, timeout=120)
        assert run.returncode in (0, 3), run.stderr
        writer_id = run.stdout.split()[0]
        with open_repo(where) as repo:
            assert len(repo.store.attach(writer_id).read_lines()) == 2  # stored, whether or not the writer died
            assert _missing(repo) == []
            session = repo.open(writer_id)
            assert session.build_context().messages[0].content[0].data == image
            assert verify(session).ok


@pytest.mark.postgres
def test_a_postgres_writer_waits_for_a_collector_that_locked_the_blob_first(tmp_path: Path) -> None:
    """A collector has locked a blob and found no line naming it; a writer storing that content now must wait (an
    ``ON CONFLICT DO NOTHING`` would not: its line would commit, then the collector delete the blob it names), and once
    the collector has deleted the blob, the writer's transaction inserts it again with its line."""
    with pg.temp_schema("blobwait") as schema, open_repo(pg.url(schema)) as repo:
        image = _image()
        holder = repo.create()
        held = holder.append_message(UserMessage([ImageContent(image, "image/png")]))
        writer = repo.create()
        store: Any = repo.store.blobs
        query, checked, go = store._q, threading.Event(), threading.Event()

        def pause_before_deleting(template: str) -> Any:
            if template.startswith("DELETE") and threading.current_thread().name == "collector":
                checked.set()  # the row is locked and no stored line names it
                go.wait(10)
            return query(template)

        store._q = pause_before_deleting
        collector = threading.Thread(target=lambda: holder.redact(held, reason="test"), name="collector")
        collector.start()
        assert checked.wait(10)
        done: list[str] = []
        appender = threading.Thread(target=lambda: done.append(writer.append_message(
            UserMessage([ImageContent(image, "image/png")]))))
        appender.start()
        time.sleep(1.0)
        waited = not done
        go.set()
        collector.join(10)
        appender.join(10)
        assert waited and done
        assert _missing(repo) == [] and len(list(store.digests())) == 1
        assert repo.open(writer.id).entry(done[0]).message.content[0].data == image
        assert verify(repo.open(writer.id)).ok


def _recorders(url: str, repo: Any) -> list[Any]:
    """The recorders a database writer may store through: the store's, and eventsourcing's own on PostgreSQL."""
    return [repo.store.recorder] + ([repo.store.app.recorder] if url == "postgres" else [])


@pytest.mark.parametrize("url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_blobs_and_events_commit_or_roll_back_together(url: str, tmp_path: Path) -> None:
    """The events insert we own (blob_tables.insert_events) runs in the blobs' transaction and commits nothing of its
    own: a taken version rolls the blobs back with the events; a free one stores both, and eventsourcing's own
    readers (its notification log too) see the event."""
    from eventsourcing.persistence import ApplicationRecorder, IntegrityError

    from sessiontree.content.blob_tables import TableBlobs
    from sessiontree.storage.recorder import stored_event

    with pg.temp_schema("blobtx") if url == "postgres" else nullcontext() as schema, \
            open_repo(_where(url, tmp_path, schema)) as repo:
        session = repo.create()
        for recorder in _recorders(url, repo):
            table = TableBlobs(recorder, "eventsourcing.postgres" if url == "postgres" else "eventsourcing.sqlite")
            assert table.joins(recorder)
            data = os.urandom(100)
            digest = hashlib.sha256(data).hexdigest()
            taken = stored_event(session.id, 1, b'{"type":"custom"}')
            with pytest.raises(IntegrityError):
                table.insert_with(recorder, [taken], [(digest, data)])
            assert table.get(digest) is None  # rolled back with the events
            other = stored_event(f"other-{digest[:8]}", 1, b'{"type":"custom"}')
            table.insert_with(recorder, [other], [(digest, data)])
            assert table.get(digest) == data and recorder.select_events(other.originator_id) == [other]
            if isinstance(recorder, ApplicationRecorder):
                last = recorder.select_notifications(start=recorder.max_notification_id(), limit=1)
                assert [(n.originator_id, n.originator_version) for n in last] == [(other.originator_id, 1)]


@pytest.mark.parametrize("url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_writers_and_collectors_of_the_same_content_at_once_leave_no_line_without_its_blob(url: str, tmp_path: Path) -> None:
    """Threads, each on its own connection, append the same few images to new sessions and erase or delete them
    again at once (each erasure and deletion collects what no stored line names): in the end every stored line's
    blobs are there and every session verifies."""
    images = [_image(2000) for _ in range(2)]
    with pg.temp_schema("blobmany") if url == "postgres" else nullcontext() as schema:
        where = _where(url, tmp_path, schema)
        with open_repo(where) as repo:
            repo.create()  # the tables, before the threads race for them
        errors: list[BaseException] = []

        def work(seed: int) -> None:
            with open_repo(where) as mine:
                for i in range(12):
                    try:
                        session = mine.create()
                        entry = session.append_message(UserMessage([ImageContent(images[(seed + i) % 2], "image/png")]))
                        if i % 3 == 0:
                            session.redact(entry, reason="test")
                        elif i % 3 == 1:
                            mine.delete(session.id)
                    except BaseException as exc:  # reported by the main thread
                        errors.append(exc)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert errors == []
        with open_repo(where) as repo:
            assert _missing(repo) == []
            sessions = [repo.open(info.id) for info in repo.list()]
            assert len(sessions) == 1 + 4 * 8 and all(verify(s).ok for s in sessions)
