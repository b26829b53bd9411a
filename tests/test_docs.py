"""The docs are executed: every ```python block of docs/*.md runs, in order, per file.

Blocks of one file share a namespace, so a page can build on its earlier examples. A block
fenced as ```python no-run is shown but not run. Each file runs in an empty temporary
working directory, so examples may create files.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
FENCE = re.compile(r"^```python(?P<flags>[^\n]*)\n(?P<body>.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


def python_blocks(text: str) -> list[tuple[int, str, bool]]:
    """(first line number, code, runnable) for each ```python block of a Markdown text."""
    blocks = []
    for match in FENCE.finditer(text):
        line = text.count("\n", 0, match.start("body")) + 1
        runnable = "no-run" not in match.group("flags").split()
        blocks.append((line, match.group("body"), runnable))
    return blocks


def test_blocks_are_found_with_their_lines_and_flags():
    """The block finder sees both kinds of fence and reports where each block starts."""
    text = "# T\n\n```python\nx = 1\n```\n\ntext\n\n```python no-run\nboom()\n```\n"
    assert python_blocks(text) == [(4, "x = 1\n", True), (10, "boom()\n", False)]


DOC_FILES = sorted(DOCS.glob("*.md")) if DOCS.is_dir() else []


@pytest.mark.parametrize("path", DOC_FILES, ids=[p.name for p in DOC_FILES])
def test_doc_examples_run(path, tmp_path, monkeypatch):
    """Every runnable Python example of the page runs without error (assertions included)."""
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": f"docs_{path.stem.replace('-', '_')}"}
    for line, code, runnable in python_blocks(path.read_text(encoding="utf-8")):
        if not runnable:
            continue
        # Pad so tracebacks show the Markdown file's own line numbers.
        compiled = compile("\n" * (line - 1) + code, str(path), "exec")
        exec(compiled, namespace)
