"""msgspec is the library's one JSON library (issue 33, item 6): a module may import orjson or the standard library's
json only if it is listed here with its reason: what msgspec cannot do, and the frameworks' own JSON (each hands us,
or expects back, JSON of its own)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the package's source folders: every top-level folder that is a package (tests and benchmarks are not)
LIBRARY = tuple(sorted(p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file() and p.name != "tests"))
_IMPORT = re.compile(r"^\s*(?:import (orjson|json)\b|from (orjson|json)(?:\.\w+)* import )", re.MULTILINE)

# What msgspec cannot do.
LEAD = {
    "wire/jsontext.py": "json's object_pairs_hook names a key repeated in one object: msgspec (and orjson) keep the "
                            "last value silently and have no option to report it (msgspec issue 648)",
}
# A framework's own JSON: reproduced with the library the framework uses, or parsed as it gave it.
FRAMEWORK = {
    "application/integrations/adk_events.py": "a tool result's text as ADK writes it (json.dumps, ensure_ascii=False)",
    "application/integrations/openai_agents_items.py": "an argument string as the Agents SDK spells it (json.dumps "
                                                       "defaults), to recognise that spelling",
}


def _importers() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for folder in LIBRARY:
        for path in sorted((ROOT / folder).rglob("*.py")):
            names = {a or b for a, b in _IMPORT.findall(path.read_text(encoding="utf-8"))}
            if names:
                found[path.relative_to(ROOT).as_posix()] = names
    return found


def test_only_listed_modules_import_another_json_library() -> None:
    unlisted = sorted(set(_importers()) - set(LEAD) - set(FRAMEWORK))
    assert not unlisted, f"use msgspec (wire/jsontext.py keeps orjson's layout) in: {unlisted}"


def test_the_allow_list_names_only_modules_that_still_import_one() -> None:
    stale = sorted((set(LEAD) | set(FRAMEWORK)) - set(_importers()))
    assert not stale, f"these no longer import orjson or json: remove them from the allow-list: {stale}"


def test_the_scan_finds_an_import(tmp_path: Path) -> None:
    text = "from __future__ import annotations\n\nimport json\n    import orjson\nfrom json import loads\nimport jsonschema\n"
    assert {a or b for a, b in _IMPORT.findall(text)} == {"json", "orjson"}
    assert not _IMPORT.findall("import jsonschema\nfrom sessiontree.wire.jsontext import dumps\n")
