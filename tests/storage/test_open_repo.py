"""open_repo(url): one way in to every repository kind."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

import sessiontree_pg as pg

from sessiontree import FunctionProjection, SessionError
from sessiontree.repository import (
    DatabaseSessionRepo,
    InMemorySessionRepo,
    JsonlSessionRepo,
    open_repo,
)


def test_memory_url_gives_an_in_memory_repo() -> None:
    """memory: is an InMemorySessionRepo; two calls are two separate stores."""
    first, second = open_repo("memory:"), open_repo("memory:")
    assert isinstance(first, InMemorySessionRepo)
    first.create(cwd="/p")
    assert second.list() == []


def test_popo_url_gives_the_database_repo_on_eventsourcing_popo() -> None:
    """popo: runs the database repository on eventsourcing's in-memory module."""
    repo = open_repo("popo:")
    assert isinstance(repo, DatabaseSessionRepo) and repo.module == "eventsourcing.popo"


@pytest.mark.parametrize("form", ["plain", "pathlike", "jsonl-abs", "jsonl-bare"])
def test_directory_forms_give_a_jsonl_repo(tmp_path: Path, form: str) -> None:
    """A plain path, a PathLike, jsonl:///abs/dir and jsonl:dir all name the same directory."""
    target = tmp_path / "sessions"
    url = {
        "plain": str(target),
        "pathlike": target,
        "jsonl-abs": f"jsonl://{target}",
        "jsonl-bare": f"jsonl:{target}",
    }[form]
    repo = open_repo(url)
    assert isinstance(repo, JsonlSessionRepo)
    session = repo.create(cwd="/p")
    assert (target / f"{session.id}.jsonl").is_file()


def test_relative_directory_paths_resolve_from_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A relative path (like the CLI's default .sessions) is taken from the current directory."""
    monkeypatch.chdir(tmp_path)
    repo = open_repo(".sessions")
    session = repo.create(cwd="/p")
    assert (tmp_path / ".sessions" / f"{session.id}.jsonl").is_file()


def test_sqlite_urls_follow_sqlalchemy_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """sqlite:///rel.db is relative to the working directory, sqlite:////abs.db absolute."""
    monkeypatch.chdir(tmp_path)
    rel = open_repo("sqlite:///rel.db")
    rel.create(cwd="/p")
    rel.close()
    assert (tmp_path / "rel.db").is_file()
    absolute = open_repo(f"sqlite:///{tmp_path / 'abs.db'}")
    assert isinstance(absolute, DatabaseSessionRepo) and absolute.module == "eventsourcing.sqlite"
    absolute.close()
    assert (tmp_path / "abs.db").is_file()


def test_repository_keywords_pass_through(tmp_path: Path) -> None:
    """Keyword arguments such as projections= reach the repository and its sessions."""
    counter = FunctionProjection("n", lambda: 0, lambda n, e: n + 1)
    for url in ("memory:", str(tmp_path / "j"), f"sqlite:{tmp_path / 'k.db'}"):
        repo = open_repo(url, projections=[counter])
        assert repo.create(cwd="/p", name="x").projection("n") == 1
        repo.close()


@pytest.mark.parametrize(
    "url",
    ["ftp://host/x", "mysql://u@h/db", "jsonl://host/dir", "sqlite:", "postgresql://u@h:5432/", "postgresql://u@h:x/db"],
)
def test_bad_urls_are_storage_errors(url: str) -> None:
    """Unknown schemes, hosts where paths belong, and missing parts are named clearly."""
    with pytest.raises(SessionError) as info:
        open_repo(url)
    assert info.value.code == "storage"


def test_non_string_urls_are_type_errors() -> None:
    """open_repo needs a string or a path."""
    with pytest.raises(TypeError):
        open_repo(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        open_repo("")


@pytest.mark.postgres
def test_postgresql_url_with_schema_and_settings() -> None:
    """postgresql://user@host:port/db?schema=...&pool_size=... configures eventsourcing.postgres."""
    with pg.temp_schema("url") as schema:
        repo = open_repo(f"{pg.url(schema)}&pool_size=2&lock_timeout=5")
        try:
            assert isinstance(repo, DatabaseSessionRepo) and repo.module == "eventsourcing.postgres"
            datastore = repo.recorder.datastore  # type: ignore[attr-defined]
            assert datastore.schema == schema
            assert datastore.lock_timeout == 5
            assert repo.env["POSTGRES_POOL_SIZE"] == "2"
            assert repo.env["ORIGINATOR_ID_TYPE"] == "text"
            session = repo.create(cwd="/p")
            assert session.storage.location == f"{pg.url(schema)}#{session.id}"
        finally:
            repo.close()


@pytest.mark.postgres
def test_a_password_never_appears_in_locations(monkeypatch: pytest.MonkeyPatch) -> None:
    """A password in the URL reaches the driver but not locations, listings or messages."""
    with pg.temp_schema("pw") as schema:
        repo = open_repo(f"postgresql://{pg.USER}:s3cret@{pg.HOST}:{pg.PORT}/{pg.DBNAME}?schema={schema}")
        try:
            session = repo.create(cwd="/p")
            assert "s3cret" not in session.storage.location
            assert all("s3cret" not in i.path for i in repo.list())
        finally:
            repo.close()


def test_settings_from_the_environment_do_not_override_the_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An eventsourcing variable in the environment cannot redirect a URL to another store."""
    monkeypatch.setenv("PERSISTENCE_MODULE", "eventsourcing.popo")
    monkeypatch.setenv("SESSIONTREE_SQLITE_DBNAME", os.fspath(tmp_path / "other.db"))
    repo = open_repo(f"sqlite:{tmp_path / 'mine.db'}")
    repo.create(cwd="/p")
    repo.close()
    assert (tmp_path / "mine.db").is_file() and not (tmp_path / "other.db").exists()
