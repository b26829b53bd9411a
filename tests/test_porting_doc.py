"""docs/porting.md names only files that are in the repository, and lists every seed difference it promises (issue 37)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "porting.md"


def test_every_file_the_porting_page_names_is_in_the_repository():
    """Each path in backticks (``tests/test_seed_port.py``) and each relative link resolves to a file of the repository."""
    text = DOC.read_text(encoding="utf-8")
    named = set(re.findall(r"`([\w.-]+(?:/[\w.-]+)+\.\w+)`", text))
    named |= {ROOT / "docs" / link for link in re.findall(r"\]\(([\w./-]+\.md)(?:#[\w-]+)?\)", text)}
    named |= {ROOT / "docs" / Path(m).name for m in re.findall(r"\((docs/[\w.-]+\.md)\)", text)}
    assert named, "the page names files"
    missing = sorted(str(p) for p in named if not (ROOT / p).is_file())
    assert not missing, f"docs/porting.md names files that are not in the repository: {missing}"


def test_the_differences_cover_what_the_seed_audit_found():
    """Each difference the audit of issue 37 found is listed (or is no longer a difference)."""
    text = DOC.read_text(encoding="utf-8")
    for heading in ("**`get_branch` is the whole path to the root.**", "**A model change needs a provider and a model id.**",
                    "**Thinking levels are pi's list.**", "**A fork \"before\" needs a user message.**",
                    "**Session names are trimmed when read.**", "**No `SessionMetadata` types.**"):
        assert heading in text, heading
    assert "`append_branch_summary(session, from_id" in text and "positional or keyword" in text
