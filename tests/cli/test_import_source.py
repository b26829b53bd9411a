"""The one-file source behind `sessiontree import` and `fork FILE`: it serves its own session only."""

import pytest

from sessiontree import JsonlSessionStorage, SessionError
from sessiontree.cli.destination import OneFile


def test_the_import_source_serves_only_its_own_session(tmp_path):
    """Its own id attaches; another id is not_found; nothing can be deleted from it or stored in it."""
    storage = JsonlSessionStorage.create(tmp_path / "s.jsonl", cwd="/p")
    source = OneFile(storage)
    assert source.attach(storage.session_id) is storage
    with pytest.raises(SessionError) as err:
        source.attach("0195d5c5-0000-7000-8000-000000000000")
    assert err.value.code == "not_found"
    with pytest.raises(SessionError) as err:
        source.remove(storage.session_id)
    assert err.value.code == "storage"
    with pytest.raises(SessionError) as err:
        source.store_header(storage.header)
    assert err.value.code == "storage"
    storage.close()
