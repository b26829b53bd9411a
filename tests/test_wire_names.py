"""Every wire-only name is spelled in one module per dialect (issue 33, item 3).

The modules that read lines (the listing index, search, blobs, the chain, retention, the recorders) decode them through
the typed envelopes at the end of ``wire/schema.py`` and take any key they need as a name from there; so a key of a
dialect's files appears as a string literal in that dialect's wire module and nowhere else in the library.

What counts as wire-only: every camelCase key pi writes (no Python name is camelCase) and, natively, ``parent_session``.
The other native keys (``target_id``, ``custom_type``, ...) are also the attribute names of the domain classes, which
the domain, redaction and the apps spell as attribute names, so a grep cannot tell a wire read from them.
"""

from __future__ import annotations

import ast
import functools
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# the package's source folders: every top-level folder that is a package (tests and benchmarks are not)
LIBRARY = tuple(sorted(p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file() and p.name != "tests"))
WIRE_MODULE = {"native": "wire/schema.py", "pi": "wire/pi_names.py"}
WIRE_ONLY = {
    "native": ("parent_session",),
    "pi": (
        "parentId", "parentSession", "toolCallId", "toolName", "firstKeptEntryId", "firstKeptEntryIndex", "thinkingLevel",
        "modelId", "customType", "tokensBefore", "fromId", "targetId", "isError", "stopReason", "errorMessage",
        "cacheRead", "cacheWrite", "totalTokens", "mimeType", "thinkingSignature", "activeToolNames", "fromHook",
        "retainedTail", "hookMessage", "toolResult", "toolCall", "compactionSummary", "branchSummary",
    ),
}
# Formats of their own that spell a wire name: not a read of a line, so they stay (module, name: why).
OWN_FORMATS = {
    ("cli/cmd_inspect.py", "parent_session"): "a key of `sessiontree show --json`, the CLI's own output",
    ("cli/cmd_write.py", "parent_session"): "a key of `sessiontree fork --json`, the CLI's own output",
    ("cli/cmd_inspect.py", "thinkingLevel"): "`context --format pi` prints the shape of pi's buildSessionContext",
    ("cli/cmd_inspect.py", "modelId"): "`context --format pi` prints the shape of pi's buildSessionContext",
    ("storage/pg_sessions.py", "parent_session"): "a column of the PostgreSQL listing table",
    ("domain/aggregate.py", "parent_session"): "the command's own argument, named in its error message",
    # projections import only the domain: pi's context_edit entry reaches it as raw data (UnknownEntryAppended);
    # whether its target becomes a domain concept is the domain's call, not this module's
    ("projections/pi_context.py", "targetId"): "the data of pi's context_edit entry, read by a projection",
}


@functools.cache
def _literals() -> dict[str, set[str]]:
    """Every string literal of the library, and the modules (``folder/file.py``) spelling it."""
    found: dict[str, set[str]] = defaultdict(set)
    for folder in LIBRARY:
        for path in sorted((ROOT / folder).rglob("*.py")):
            module = path.relative_to(ROOT).as_posix()
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=module)):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    found[node.value].add(module)
    return found


def test_each_wire_only_name_is_spelled_only_in_its_dialects_wire_module() -> None:
    literals = _literals()
    elsewhere = {}
    for dialect, names in WIRE_ONLY.items():
        home = WIRE_MODULE[dialect]
        for name in names:
            modules = literals.get(name, set())
            assert home in modules, f"{name!r} is not in {home}: the list above is out of date"
            stray = {m for m in modules - {home} if (m, name) not in OWN_FORMATS}
            if stray:
                elsewhere[name] = sorted(stray)
    assert elsewhere == {}, f"wire names spelled outside their dialect's wire module (import them from it): {elsewhere}"


def test_the_exceptions_still_hold() -> None:
    """An exception that no longer spells its name goes from the lists (the temporary ones are meant to)."""
    literals = _literals()
    stale = sorted(k for k in OWN_FORMATS if k[0] not in literals.get(k[1], set()))
    assert stale == [], f"listed exceptions that no longer apply (remove them): {stale}"
