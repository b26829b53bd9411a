"""The cache of generated code (adapters/codegen.py): used when sound, never trusted when not."""

from __future__ import annotations

import marshal
import os
from pathlib import Path

import pytest

from sessiontree.adapters import codegen

SOURCE = "def f(x):\n    return x * 2\n"


def _run(code: object) -> int:
    ns: dict[str, object] = {}
    exec(code, ns)
    return ns["f"](21)  # type: ignore[operator]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "sessiontree" / "code"


def test_code_is_compiled_once_then_read_back(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _run(codegen.compiled(SOURCE, "<t>")) == 42
    (kept,) = cache.iterdir()
    assert kept.stat().st_mode & 0o777 == 0o600 and cache.stat().st_mode & 0o777 == 0o700

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("compiled again")

    monkeypatch.setattr(codegen, "compile", refuse, raising=False)
    assert _run(codegen.compiled(SOURCE, "<t>")) == 42
    with pytest.raises(AssertionError, match="compiled again"):  # other source: not in the cache
        codegen.compiled(SOURCE.replace("2", "3"), "<t>")


@pytest.mark.parametrize("damage", [b"", b"\x00garbage", marshal.dumps(42), "other"])
def test_a_damaged_or_foreign_entry_is_compiled_afresh(cache: Path, damage: object) -> None:
    codegen.compiled(SOURCE, "<t>")
    (kept,) = cache.iterdir()
    kept.write_bytes(marshal.dumps(compile("def f(x):\n    return 0\n", "<other>", "exec")) if damage == "other"
                     else damage)  # type: ignore[arg-type]
    assert _run(codegen.compiled(SOURCE, "<t>")) == 42
    assert _run(marshal.loads(kept.read_bytes())) == 42  # and the entry is written again


def test_without_a_usable_cache_it_still_compiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert _run(codegen.compiled(SOURCE, "<t>")) == 42
    monkeypatch.setenv("XDG_CACHE_HOME", "relative")
    monkeypatch.setenv("HOME", str(tmp_path / "no-such-home"))
    assert _run(codegen.compiled(SOURCE, "<t>")) == 42
    assert not os.path.exists(tmp_path / "no-such-home")
