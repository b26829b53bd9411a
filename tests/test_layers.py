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
BARE_NAMES = {"domain", "projections", "adapters", "application"}


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


def test_the_package_still_exports_adapter_backed_names(tmp_path):
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


# The application layer: the modules of application/, installed as sessiontree.<name> (and the package itself).
APPLICATION = tuple(f"sessiontree.{p.stem}" for p in (ROOT / "application").glob("*.py") if p.stem != "__init__")


def _imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found += [node.module] if node.module != "sessiontree" else [f"sessiontree.{a.name}" for a in node.names]
    return found


def test_each_layer_imports_only_inward():
    """Statically: domain/ names no other layer; projections/ only the domain; adapters/ never the application
    (repositories live in the application and wrap the adapters' stores, not the other way round)."""
    assert "sessiontree.session" in APPLICATION and "sessiontree.repository" in APPLICATION
    rules = {
        "domain": ("sessiontree.projections", "sessiontree.adapters", *APPLICATION),
        "projections": ("sessiontree.adapters", *APPLICATION),
        "adapters": APPLICATION,
    }
    offenders = [
        f"{path.relative_to(ROOT)}: {name}"
        for folder, banned in rules.items()
        for path in (ROOT / folder).rglob("*.py")
        for name in _imports(path)
        if name.startswith(banned) and name[len(next(b for b in banned if name.startswith(b))):][:1] in ("", ".")
    ]
    assert offenders == []
