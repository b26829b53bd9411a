"""The server's open sessions stay within their bounds, and follow their files."""

from __future__ import annotations

from sessiontree import JsonlSessionRepo, UserMessage
from sessiontree.web.sessions import OpenSessions


def _repo(tmp_path, sizes):
    ids = []
    with JsonlSessionRepo(tmp_path / "r") as repo:
        for size in sizes:
            session = repo.create(cwd="/w")
            for i in range(size):
                session.append_message(UserMessage(content=f"m{i}"))
            ids.append(session.id)
            session.close()
    return ids


def test_the_least_recently_used_sessions_are_closed_past_the_bounds(tmp_path):
    a, b, c = _repo(tmp_path, [30, 30, 30])
    sessions = OpenSessions(str(tmp_path / "r"), keep=2)
    try:
        for sid in (a, b, a, c):
            sessions.run(sid, lambda held: len(held.session))
        assert sessions.open_ids == [a, c]
        sessions.max_entries = 50  # two sessions of 30 entries are too many: only the one in use stays
        assert sessions.run(b, lambda held: len(held.session)) == 30
        assert sessions.open_ids == [b]
    finally:
        sessions.close()


def test_a_rewritten_file_is_read_again(tmp_path):
    (sid,) = _repo(tmp_path, [3])
    sessions = OpenSessions(str(tmp_path / "r"))
    try:
        first = sessions.run(sid, lambda held: held.session)
        path = first.storage.path
        lines = path.read_bytes().splitlines(keepends=True)
        path.write_bytes(b"".join(lines[:-1]))  # cut back: not an append, so the session is opened again
        assert sessions.run(sid, lambda held: (held.session is not first, len(held.session))) == (True, 2)
    finally:
        sessions.close()


def test_a_slow_use_of_one_session_does_not_hold_up_another(tmp_path):
    import threading

    a, b = _repo(tmp_path, [3, 3])
    sessions = OpenSessions(str(tmp_path / "r"))
    inside, finish = threading.Event(), threading.Event()

    def slow(held):
        inside.set()
        assert finish.wait(30)
        return len(held.session)

    worker = threading.Thread(target=sessions.run, args=(a, slow))
    worker.start()
    try:
        assert inside.wait(30)
        assert sessions.run(b, lambda held: len(held.session)) == 3  # while a is still in use
        assert sessions.infos()
    finally:
        finish.set()
        worker.join(30)
        sessions.close()
