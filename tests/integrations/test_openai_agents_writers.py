"""Several ``SessionTreeSession`` objects, in one process or several, on one session id and never closed: each call
does what the same call does on the SDK's own ``SQLiteSession`` objects sharing one id (the oracle, run alongside)."""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from agents import SQLiteSession

from sessiontree import open_repo, verify
from sessiontree.integrations.openai_agents import SessionTreeSession

WORKER = textwrap.dedent(
    """
    import asyncio, json, sys
    from sessiontree.integrations.openai_agents import SessionTreeSession
    store = SessionTreeSession("chat-1", sys.argv[1])  # one object for the whole run, never closed
    for line in sys.stdin:
        op, _, text = line.rstrip("\\n").partition(" ")
        if op == "add":
            result = asyncio.run(store.add_items([{"role": "user", "content": text}, {"role": "assistant", "content": text + "!"}]))
        elif op == "pop":
            result = asyncio.run(store.pop_item())
        elif op == "clear":
            result = asyncio.run(store.clear_session())
        else:
            result = asyncio.run(store.get_items())
        print(json.dumps(result), flush=True)
    """
)

OPS = ["add", "add", "add", "pop", "get", "clear"]


def _script(seed: int, length: int) -> list[tuple[int, str]]:
    rng = random.Random(seed)
    return [(rng.randrange(2), rng.choice(OPS)) for _ in range(length)]


def _text(n: int) -> str:
    return f"item {n}"


async def _call(store: Any, op: str, n: int) -> Any:
    if op == "add":
        return await store.add_items([{"role": "user", "content": _text(n)}, {"role": "assistant", "content": _text(n) + "!"}])
    if op == "pop":
        return await store.pop_item()
    if op == "clear":
        return await store.clear_session()
    return await store.get_items()


def _contents(items: Any) -> Any:
    """What is compared: the items' roles and texts (each store adds its own fields to an item it reads back)."""
    if items is None or isinstance(items, dict):
        return None if items is None else (items.get("role"), items.get("content"))
    return [(i.get("role"), i.get("content")) for i in items]


@pytest.mark.parametrize("backend", ["jsonl", "sqlite"])
def test_two_stores_in_one_process_never_closed_do_what_two_sqlite_sessions_do(tmp_path: Path, backend: str) -> None:
    repo = str(tmp_path / "repo") if backend == "jsonl" else f"sqlite:{tmp_path / 'sessions.db'}"
    ours = [SessionTreeSession("chat-1", repo), SessionTreeSession("chat-1", repo)]
    theirs = [SQLiteSession("chat-1", str(tmp_path / "oracle.db")) for _ in range(2)]

    async def run() -> None:
        for n, (who, op) in enumerate(_script(31, 120)):
            got, expected = await _call(ours[who], op, n), await _call(theirs[who], op, n)
            assert _contents(got) == _contents(expected), (n, who, op)
            assert _contents(await ours[1 - who].get_items()) == _contents(await theirs[1 - who].get_items()), (n, op)

    asyncio.run(run())
    with open_repo(repo) as opened:
        assert verify(opened.open("chat-1")).ok


def test_two_processes_never_closed_do_what_two_sqlite_sessions_do(tmp_path: Path) -> None:
    """Two processes, each with one store on the same JSONL session id, called in turn."""
    repo = str(tmp_path / "repo")
    workers = [subprocess.Popen([sys.executable, "-c", WORKER, repo], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True) for _ in range(2)]
    theirs = [SQLiteSession("chat-1", str(tmp_path / "oracle.db")) for _ in range(2)]
    try:
        for n, (who, op) in enumerate(_script(32, 60)):
            worker = workers[who]
            assert worker.stdin is not None and worker.stdout is not None
            worker.stdin.write(f"{op} {_text(n)}\n")
            worker.stdin.flush()
            got = json.loads(worker.stdout.readline())
            expected = asyncio.run(_call(theirs[who], op, n))
            assert _contents(got) == _contents(expected), (n, who, op)
    finally:
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.close()
            worker.wait(30)
    assert all(worker.returncode == 0 for worker in workers)
    assert verify(open_repo(repo).open("chat-1")).ok


def test_two_processes_adding_at_once_keep_every_item_and_each_call_together(tmp_path: Path) -> None:
    """Two processes adding 2-item turns at the same time: every item is in the history once, each turn's items next
    to each other, each process's turns in its order (as on a SQLiteSession)."""
    repo = str(tmp_path / "repo")
    script = textwrap.dedent(
        """
        import asyncio, sys
        from sessiontree.integrations.openai_agents import SessionTreeSession
        store = SessionTreeSession("chat-2", sys.argv[1])
        async def main():
            for n in range(100):
                await store.add_items([{"role": "user", "content": f"{sys.argv[2]} {n}"},
                                       {"role": "assistant", "content": f"{sys.argv[2]} {n}!"}])
        asyncio.run(main())
        """
    )
    assert SessionTreeSession("chat-2", repo).session.id == "chat-2"  # created before the race
    workers = [subprocess.Popen([sys.executable, "-c", script, repo, name]) for name in ("a", "b")]
    assert all(worker.wait(120) == 0 for worker in workers)
    items = [i["content"] for i in asyncio.run(SessionTreeSession("chat-2", repo).get_items())]
    assert len(items) == 400
    for name in ("a", "b"):
        mine = [text for text in items if text.startswith(name + " ")]
        assert mine == [t for n in range(100) for t in (f"{name} {n}", f"{name} {n}!")]
    assert all(items[i + 1] == items[i] + "!" for i in range(0, 400, 2))
