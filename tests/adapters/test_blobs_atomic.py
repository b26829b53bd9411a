"""A database writer stores its blobs in the transaction of the lines that name them, so no crash or interleaving
leaves a stored line naming a collected blob (docs/file-format.md, *Content out of line*, *Deleting*)."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import textwrap
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest
import sessiontree_pg as pg

from sessiontree import open_repo, verify
from sessiontree.adapters.blob_gc import digests_of

# The writer, in its own process: an image another session also holds is appended; between encoding the line and
# storing it, that other session erases its entry (collecting the image, which no stored line names yet); the writer
# dies the moment it puts a blob after that, i.e. after its line is stored (the old design's second put).
_WRITER = textwrap.dedent("""
    import base64, os, sys
    from sessiontree import ImageContent, UserMessage, open_repo
    from sessiontree.adapters.blob_tables import TableBlobs

    url, image = sys.argv[1], open(sys.argv[2]).read()
    repo = open_repo(url)
    holder = repo.create()
    entry = holder.append_message(UserMessage([ImageContent(image, "image/png")]))
    writer = repo.create()
    print(writer.id, flush=True)
    storage, phase = writer.storage, []
    sealed_lines, put = storage.sealed_lines, TableBlobs.put

    def sealed_then_erased(*args, **kwargs):
        found = sealed_lines(*args, **kwargs)
        holder.redact(entry, reason="the other session's erasure, at the worst moment")
        phase.append("storing")
        return found

    def put_or_die(self, digest, data):
        if phase:
            os._exit(3)  # killed after its line is stored, before any later put
        return put(self, digest, data)

    storage.sealed_lines = sealed_then_erased
    TableBlobs.put = put_or_die
    writer.append_message(UserMessage([ImageContent(image, "image/png")]))
    print("appended", flush=True)
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


@pytest.mark.parametrize("url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_writer_killed_after_storing_its_line_never_leaves_it_naming_a_collected_blob(url: str, tmp_path: Path) -> None:
    """The attack of the old design (put, store the line, put again): a collection between the put and the line, then
    the writer killed before its second put, left the line naming a missing blob. Blobs and line now commit together."""
    image = _image()
    (tmp_path / "image").write_text(image)
    with pg.temp_schema("blobkill") if url == "postgres" else nullcontext() as schema:
        where = _where(url, tmp_path, schema)
        run = subprocess.run([sys.executable, "-c", _WRITER, where, str(tmp_path / "image")], capture_output=True,
                             text=True, timeout=120)
        assert run.returncode in (0, 3), run.stderr
        writer_id = run.stdout.split()[0]
        with open_repo(where) as repo:
            assert len(repo.store.attach(writer_id).read_lines()) == 2  # stored, whether or not the writer died
            assert _missing(repo) == []
            session = repo.open(writer_id)
            assert session.build_context().messages[0].content[0].data == image
            assert verify(session).ok
