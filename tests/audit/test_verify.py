"""verify(): every kind of tampering is named at its first bad line, on files and databases (signed checkpoints:
test_verify_checkpoints.py)."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import orjson
import pytest
import sessiontree_testkit as kit
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sessiontree_verifykit import altered, lines_of, make_file, write

from sessiontree import JsonlSessionStorage, Session, SessionError, open_repo, verify
from sessiontree.audit import chain

# -- sound logs ---------------------------------------------------------------------------------


def test_a_fresh_file_verifies(tmp_path: Path) -> None:
    """A file this library wrote is ok, chained, and its head is its last line's digest."""
    path = make_file(tmp_path)
    report = verify(path)
    lines = lines_of(path)
    assert report.ok and report.chained and report.problems == [] and report.warnings == []
    assert report.session_id == kit.SESSION_ID and report.dialect == "native"
    assert report.lines == len(lines) and report.entries == len(lines) - 1
    assert report.head == chain.split(lines[-1])[1].decode()  # type: ignore[union-attr]
    assert report.first_bad_line is None and "ok" in report.summary()


def test_verify_takes_a_session_or_storage_and_reads_the_disk(tmp_path: Path) -> None:
    """Given a Session or storage, the file is read again, so changes made behind its back show."""
    path = make_file(tmp_path)
    session = Session(JsonlSessionStorage.open(path))
    assert verify(session).ok and verify(session.storage).ok and verify(str(path)).ok
    lines = lines_of(path)
    lines[2] = lines[2].replace(b"answer 0", b"answer O")
    write(path, lines)
    assert verify(session).first_bad_line == 3


# -- tampering ---------------------------------------------------------------------------------


def removed(lines: list[bytes]) -> tuple[list[bytes], int]:
    return lines[:3] + lines[4:], 4


def reordered(lines: list[bytes]) -> tuple[list[bytes], int]:
    out = list(lines)
    out[5], out[6] = out[6], out[5]
    return out, 6


def inserted_garbage(lines: list[bytes]) -> tuple[list[bytes], int]:
    return lines[:3] + [b'{"type":"custom","id":"evil0001","parent_id":null,"timestamp":"2026-11-29T11:30:00.000Z","custom_type":"x","data":1}'] + lines[3:], 4


def truncated_inside(lines: list[bytes]) -> tuple[list[bytes], int]:
    out = list(lines)
    out[3] = out[3][: len(out[3]) // 2]
    return out, 4


def header_changed(lines: list[bytes]) -> tuple[list[bytes], int]:
    out = list(lines)
    out[0] = out[0].replace(b'"cwd":"/p"', b'"cwd":"/q"')
    return out, 1


def chain_field_removed(lines: list[bytes]) -> tuple[list[bytes], int]:
    out = list(lines)
    out[2] = chain.strip(out[2])
    return out, 3


@pytest.mark.parametrize(
    "tamper", [altered, removed, reordered, inserted_garbage, truncated_inside, header_changed, chain_field_removed]
)
def test_tampering_is_named_at_the_first_bad_line(tmp_path: Path, tamper: Any) -> None:
    """Altered, removed, reordered, inserted and cut lines (and a changed header) fail at their line."""
    lines, first_bad = tamper(lines_of(make_file(tmp_path)))
    report = verify(write(tmp_path / "t.jsonl", lines))
    assert not report.ok and report.chained
    assert report.first_bad_line == first_bad, report.problems
    assert report.problems[0].line == first_bad and report.problems[0].file == str(tmp_path / "t.jsonl")


def test_an_insertion_with_a_forged_digest_is_named_by_the_line_after_it(tmp_path: Path) -> None:
    """A line inserted with a correct digest passes itself; the next line says it was inserted."""
    lines = lines_of(make_file(tmp_path))
    evil = chain.strip(lines[3]).replace(b"question 1", b"do something else")
    forged, _ = chain.seal(evil, chain.recorded(lines[2]))  # type: ignore[arg-type]
    report = verify(write(tmp_path / "t.jsonl", lines[:3] + [forged] + lines[3:]))
    chain_problems = [p for p in report.problems if "chain" in p.message]
    assert chain_problems[0].line == 5 and "line 4 was inserted" in chain_problems[0].message


def test_a_header_without_its_chain_field_is_found(tmp_path: Path) -> None:
    """Stripping the header's digest does not turn a chained file into an unchained one quietly."""
    lines = lines_of(make_file(tmp_path))
    report = verify(write(tmp_path / "t.jsonl", [chain.strip(lines[0])] + lines[1:]))
    assert not report.ok and report.first_bad_line == 1 and "header has no valid chain" in report.problems[0].message


def test_a_torn_last_line_is_a_warning_not_a_problem(tmp_path: Path) -> None:
    """What a crash leaves (a last line without its newline) is reported but the log verifies."""
    path = make_file(tmp_path)
    with open(path, "ab") as handle:
        handle.write(b'{"type":"message","id":"torn')
    report = verify(path)
    assert report.ok and report.warnings[0].line == report.lines + 1
    assert "torn last line" in report.warnings[0].message


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_flipped_byte_is_found_at_its_line(tmp_path_factory: Any, data: Any) -> None:
    """Changing any byte of any line (its newline excepted) makes verify name exactly that line."""
    folder = tmp_path_factory.mktemp("flip")
    path = make_file(folder, turns=2)
    lines = lines_of(path)
    k = data.draw(st.integers(0, len(lines) - 1), label="line index")
    position = data.draw(st.integers(0, len(lines[k]) - 1), label="byte")
    mask = data.draw(st.integers(1, 255), label="xor mask")
    line = bytearray(lines[k])
    line[position] ^= mask
    lines[k] = bytes(line)
    report = verify(write(folder / "t.jsonl", lines))
    assert not report.ok and report.first_bad_line == k + 1, report.problems


# -- logs without a chain ---------------------------------------------------------------------


def test_an_unchained_file_says_so_and_is_still_checked(tmp_path: Path) -> None:
    """A seed-format file verifies structurally with a "no chain" warning; require_chain fails it."""
    plain = [chain.strip(line) for line in lines_of(make_file(tmp_path))]
    path = write(tmp_path / "plain.jsonl", plain)
    report = verify(path)
    assert report.ok and not report.chained and report.head is None
    assert "no chain" in report.warnings[0].message
    assert not verify(path, require_chain=True).ok
    broken = write(tmp_path / "broken.jsonl", plain[:2] + [b'{"type":"message"}'] + plain[3:])
    report = verify(broken)
    assert report.first_bad_line == 3 and "has no string 'id'" in report.problems[0].message


def test_pi_files_have_no_chain_but_their_structure_is_checked(tmp_path: Path) -> None:
    """A pi file: verify says pi has no chain, and still names a damaged line."""
    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "pi"
    source = next(iter(sorted(fixtures.glob("*.jsonl"))), None) if fixtures.is_dir() else None
    if source is None:
        from sessiontree.pi.pi_storage import PiSessionStorage

        session = kit.open_session(PiSessionStorage.create(tmp_path / "made.jsonl"))
        session.append_message(kit.user("hi"))
        session.append_message(kit.assistant("hello"))
        source = tmp_path / "made.jsonl"
    path = tmp_path / "pi.jsonl"
    shutil.copy(source, path)
    report = verify(path)
    assert report.ok and report.dialect == "pi" and not report.chained
    assert "pi-dialect file" in report.warnings[0].message
    lines = lines_of(path)
    lines[2] = b'{"type":"message","id":'
    report = verify(write(path, lines))
    assert not report.ok and report.first_bad_line == 3


def test_missing_files_and_wrong_targets_raise() -> None:
    """A log that cannot be reached is an error, not a report; a wrong argument is a TypeError."""
    with pytest.raises(SessionError) as caught:
        verify("no/such/file.jsonl")
    assert caught.value.code == "not_found"
    with pytest.raises(TypeError):
        verify(42)


def test_an_empty_file_or_a_bad_header(tmp_path: Path) -> None:
    """An empty file and a file whose first line is not a header fail at line 1."""
    assert verify(write(tmp_path / "e.jsonl", [])).first_bad_line == 1
    assert verify(write(tmp_path / "h.jsonl", [b'{"type":"message"}'])).first_bad_line == 1


# -- databases ----------------------------------------------------------------------------------


def _sqlite_session(tmp_path: Path) -> tuple[Any, Any]:
    repo = open_repo(f"sqlite:///{tmp_path / 's.db'}")
    session = repo.create(cwd="/p")
    first = session.append_message(kit.user("question"))
    session.append_message(kit.assistant("answer"))
    session.append_label_change(first, "start")
    return repo, session


def test_a_database_session_verifies_with_the_same_chain(tmp_path: Path) -> None:
    """A SQLite session is chained like a file; verify reads its events in order."""
    repo, session = _sqlite_session(tmp_path)
    report = verify(session)
    assert report.ok and report.chained and report.lines == 4 and report.entries == 3
    assert report.source == session.storage.location
    assert verify(repo.store.attach(session.id)).head == report.head
    repo.close()


@pytest.mark.parametrize("change", ["update", "delete"])
def test_an_edited_or_deleted_row_is_named_by_its_version(tmp_path: Path, change: str) -> None:
    """Editing a row's JSON or deleting a row in SQLite is found at that version."""
    repo, session = _sqlite_session(tmp_path)
    with sqlite3.connect(tmp_path / "s.db") as db:
        if change == "update":
            state = db.execute(
                "SELECT state FROM stored_events WHERE originator_id=? AND originator_version=3", (session.id,)
            ).fetchone()[0]
            db.execute(
                "UPDATE stored_events SET state=? WHERE originator_id=? AND originator_version=3",
                (bytes(state).replace(b"answer", b"ANSWER"), session.id),
            )
        else:
            db.execute("DELETE FROM stored_events WHERE originator_id=? AND originator_version=3", (session.id,))
    report = verify(repo.store.attach(session.id))
    assert not report.ok and report.first_bad_line == 3
    repo.close()


@pytest.mark.postgres
def test_a_postgres_session_verifies_and_an_edited_row_is_found() -> None:
    """PostgreSQL holds the same chained lines; an UPDATE on a row is named by its version."""
    import psycopg
    import sessiontree_pg as pg
    from psycopg.sql import SQL, Identifier

    with pg.temp_schema("verify") as schema:
        repo = open_repo(pg.url(schema))
        session = repo.create(cwd="/p")
        session.append_message(kit.user("question"))
        session.append_message(kit.assistant("answer"))
        assert verify(session).ok and verify(session).chained
        with psycopg.connect(host=pg.HOST, port=pg.PORT, user=pg.USER, dbname=pg.DBNAME, autocommit=True) as conn:
            table = SQL("{0}.{1}").format(Identifier(schema), Identifier("sessiontree_events"))
            row = conn.execute(
                SQL("SELECT state FROM {0} WHERE originator_id=%s AND originator_version=2").format(table), (session.id,)
            ).fetchone()
            conn.execute(
                SQL("UPDATE {0} SET state=%s WHERE originator_id=%s AND originator_version=2").format(table),
                (bytes(row[0]).replace(b"question", b"QUESTION"), session.id),
            )
        report = verify(repo.store.attach(session.id))
        assert not report.ok and report.first_bad_line == 2
        repo.close()


def test_the_report_lines_read_well(tmp_path: Path) -> None:
    """Problems print as file:line: message, and the summary names the first one."""
    lines, _ = removed(lines_of(make_file(tmp_path)))
    report = verify(write(tmp_path / "t.jsonl", lines))
    assert str(report.problems[0]).startswith(f"{tmp_path / 't.jsonl'}:4: ")
    assert "first:" in report.summary()
    data = orjson.loads(orjson.dumps(report.to_dict()))
    assert data["ok"] is False and data["first_bad_line"] == 4 and data["problems"][0]["line"] == 4
