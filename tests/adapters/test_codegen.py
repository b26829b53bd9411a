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


PIECES = [(SOURCE, "<a>"), (SOURCE.replace("2", "3"), "<b>")]


def test_several_sources_are_kept_in_one_file_and_read_back(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert [_run(code) for code in codegen.compiled_all(PIECES)] == [42, 63]
    (kept,) = cache.iterdir()
    assert [code.co_filename for code in marshal.loads(kept.read_bytes())] == ["<a>", "<b>"]

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("compiled again")

    monkeypatch.setattr(codegen, "compile", refuse, raising=False)
    assert [_run(code) for code in codegen.compiled_all(PIECES)] == [42, 63]
    with pytest.raises(AssertionError, match="compiled again"):  # one source changed: not in the cache
        codegen.compiled_all([PIECES[0], (SOURCE.replace("2", "4"), "<b>")])


@pytest.mark.parametrize("damage", [b"\x00garbage", marshal.dumps(42), "one", "renamed"])
def test_a_damaged_or_foreign_file_of_several_is_compiled_afresh(cache: Path, damage: object) -> None:
    codegen.compiled_all(PIECES)
    (kept,) = cache.iterdir()
    code = compile(SOURCE, "<a>", "exec")
    foreign = {"one": (code,), "renamed": (code, compile(SOURCE, "<c>", "exec"))}
    kept.write_bytes(marshal.dumps(foreign[damage]) if damage in foreign else damage)  # type: ignore[arg-type]
    assert [_run(code) for code in codegen.compiled_all(PIECES)] == [42, 63]
    assert [_run(code) for code in marshal.loads(kept.read_bytes())] == [42, 63]  # and the file is written again


def test_the_wire_decoder_reads_its_converters_from_one_file(cache: Path) -> None:
    from sessiontree.adapters.codec import Codec

    Codec()._typed()
    (kept,) = cache.iterdir()
    names = [code.co_filename for code in marshal.loads(kept.read_bytes())]
    assert "<sessiontree converter AssistantMessage>" in names and len(names) == len(set(names)) > 20
    assert kept.stat().st_size < codegen._MAX_BYTES
