"""Erasure reaches what shows a session besides its log: the listing of every backend (in this process, a fresh one and
``sessiontree ls``) and a web viewer that had the session open while ``sessiontree redact`` ran in another process
(issue 32, item 1; docs/audit.md, *Erasure*)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import sessiontree_pg as pg
from sessiontree_cli_runner import run
from sessiontree_web import Server

from sessiontree import UserMessage, open_repo
from sessiontree.domain.messages import AssistantMessage, TextContent

SECRET = "hunter2-launch-code-swordfish"


@pytest.fixture(params=["memory", "popo", "sqlite", "postgres", "jsonl"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    kind = request.param
    if kind == "postgres":
        with pg.temp_schema("erase") as schema:
            yield pg.url(schema)
        return
    yield {"memory": "memory:", "popo": "popo:", "sqlite": f"sqlite:///{tmp_path}/s.db", "jsonl": str(tmp_path / "r")}[kind]


def _listed(repo: object) -> list[str | None]:
    return [info.first_message for info in repo.list()]  # type: ignore[attr-defined]


def test_an_erased_first_message_leaves_the_listing(url: str, tmp_path: Path) -> None:
    """After redact, no listing row shows the erased text: in the process that erased it, a fresh repository object,
    and the command line's ``ls``."""
    repo = open_repo(url)
    session = repo.create(cwd="/w")
    first = session.append_message(UserMessage(content=f"the code is {SECRET}", timestamp=0))
    session.append_message(AssistantMessage(content=(TextContent("noted"),), timestamp=0))
    assert SECRET in str(_listed(repo))  # listed once before the erasure, as a viewer or picker would
    session.redact(first, reason="a secret")
    assert SECRET not in str(_listed(repo))
    assert _listed(repo) == ["[redacted]"]
    if url.startswith(("memory:", "popo:")):
        return  # nothing outlives the process
    with open_repo(url) as fresh:
        assert _listed(fresh) == ["[redacted]"]
    shown = run(("ls", "--repo", url, "--json"), tmp_path).stdout
    assert SECRET not in shown and "[redacted]" in shown
    repo.close()


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_a_running_viewer_stops_serving_erased_content(kind: str, tmp_path: Path) -> None:
    """A ``serve`` process that showed a session keeps nothing of it once ``sessiontree redact`` (another process)
    erased an entry: context, tree, export, replay, the summary and ``/api/sessions`` all show the stub."""
    url = str(tmp_path / "r") if kind == "jsonl" else f"sqlite:///{tmp_path}/s.db"
    with open_repo(url) as repo:
        session = repo.create(cwd="/w")
        first = session.append_message(UserMessage(content=f"the code is {SECRET}", timestamp=0))
        session.append_message(AssistantMessage(content=(TextContent("noted"),), timestamp=0))
        sid = session.id
        session.close()
    server = Server(Path(url) if kind == "jsonl" else url, tmp_path)  # type: ignore[arg-type]
    try:
        paths = ["/api/sessions", f"/api/sessions/{sid}", f"/api/sessions/{sid}/context", f"/api/sessions/{sid}/tree",
                 f"/api/sessions/{sid}/replay/2", f"/api/sessions/{sid}/export?format=markdown",
                 f"/api/sessions/{sid}/export?format=native",
                 f"/api/sessions/{sid}/context?view=page&start=0", f"/api/sessions/{sid}/verify"]

        def bodies() -> dict[str, bytes]:
            out = {}
            for path in paths:
                status, body, _ = server.get(path)
                assert status == 200, (path, body)
                out[path] = body
            return out

        before = bodies()
        shown = [p for p in paths if SECRET.encode() in before[p]]
        assert len(shown) == 7, f"the viewer showed the content before in {shown}"
        run(("redact", sid, first, "--reason", "a secret", "--repo", url), tmp_path)
        after = bodies()
        leaked = [p for p, body in after.items() if SECRET.encode() in body]
        assert leaked == [], f"still served after the erasure: {leaked}"
        assert b"[redacted]" in after[f"/api/sessions/{sid}/context"]
        verified = json.loads(after[f"/api/sessions/{sid}/verify"])
        assert verified["ok"], verified
    finally:
        server.stop()
