"""The layers stay honest: the domain and projections load no adapter or serialiser, and no
module imports the bare folder names ``domain``, ``projections`` or ``adapters``."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN_PREFIXES = ("sessiontree.adapters", "cattrs", "orjson")
BARE_NAMES = {"domain", "projections", "adapters", "facade"}


def modules_loaded_by(statement: str, cwd: Path) -> list[str]:
    """The modules a fresh interpreter (started in an empty directory) has loaded after ``statement``."""
    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=cwd)
    return json.loads(done.stdout)


@pytest.mark.parametrize(
    "statement",
    [
        "import sessiontree.domain",
        "import sessiontree.projections",
        "import sessiontree.domain.aggregate, sessiontree.projections.context, sessiontree.projections.examples",
    ],
)
def test_domain_and_projections_load_no_adapter_or_serialiser(statement, tmp_path):
    """Importing the inner layers in a fresh interpreter loads no sessiontree.adapters, cattrs or orjson."""
    loaded = modules_loaded_by(statement, tmp_path)
    assert "sessiontree.domain" in loaded
    assert [m for m in loaded if m.startswith(FORBIDDEN_PREFIXES)] == []


def test_the_facade_still_exports_adapter_backed_names(tmp_path):
    """``from sessiontree import Session, InMemorySessionStorage`` works (loaded on first use)."""
    loaded = modules_loaded_by("from sessiontree import Session, InMemorySessionStorage", tmp_path)
    assert "sessiontree.adapters.memory" in loaded


def _project_files() -> list[Path]:
    skip = {".venv", ".git", "build", "dist", "node_modules"}
    return [
        p for p in ROOT.rglob("*.py")
        if not skip.intersection(p.relative_to(ROOT).parts) and not any(part.endswith(".egg-info") for part in p.parts)
    ]


def _bare_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] in BARE_NAMES]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module.split(".")[0] in BARE_NAMES:
            found.append(node.module)
    return found


def test_no_module_imports_a_bare_folder_name():
    """Every import goes through ``sessiontree.*``; a bare ``import domain`` would load a second copy."""
    files = _project_files()
    assert any(p.name == "aggregate.py" for p in files)
    offenders = {str(p.relative_to(ROOT)): names for p in files if (names := _bare_imports(p))}
    assert offenders == {}


def test_domain_imports_nothing_outward_and_projections_only_the_domain():
    """Statically: domain/ never names projections or adapters; projections/ never names adapters."""
    rules = {"domain": ("sessiontree.projections", "sessiontree.adapters", "sessiontree.session", "sessiontree.reader"),
             "projections": ("sessiontree.adapters", "sessiontree.session", "sessiontree.reader")}
    offenders = []
    for folder, banned in rules.items():
        for path in (ROOT / folder).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                    [node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
                offenders += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.startswith(banned)]
    assert offenders == []
