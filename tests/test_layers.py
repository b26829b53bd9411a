"""The layers stay honest: the domain and projections load no feature folder or serialiser, no module imports a
bare folder name (``domain``, ``storage``, ...), and a feature folder imports only the domain, the projections, the
wire format, the storage port and itself (issue 34: one folder per feature)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# One folder per feature, each installed as sessiontree.<folder> (pyproject's package-dir).
FEATURES = ('wire', 'storage', 'pi', 'audit', 'content', 'search', 'retention')
FORBIDDEN_PREFIXES = (*(f"sessiontree.{f}" for f in FEATURES), "cattrs", "orjson")
BARE_NAMES = {"domain", "projections", "application", *FEATURES}
# What every feature may import besides the domain and the projections: the wire format, and the storage port (the
# ports a feature's stores implement and the safe opening of files).
SHARED = ('sessiontree.wire',)
PORT = ('sessiontree.storage.storage', 'sessiontree.storage.store', 'sessiontree.storage.files')

# Imports of another feature's internals (or of the application) that today's code makes, each with why.
# This list may only shrink: a new entry needs the lead's word; an entry the code no longer needs fails the test.
ALLOWED = {
    ("audit/erasure.py", "sessiontree.content.blobs"): "an erasure deletes the erased entry's blobs",
    ("audit/erasure.py", "sessiontree.content.blob_stores"): "the scrub deletes the erased content's blob files",
    ("audit/erasure.py", "sessiontree.search.search_stores"): "the scrub removes the erased words from the search index",
    ("audit/erasure.py", "sessiontree.storage.jsonl_repo"): "the scrub rewrites the listing index and deletes crash leftovers",
    ("audit/erasure.py", "sessiontree.storage.leftovers"): "the scrub rewrites the listing index and deletes crash leftovers",
    ("audit/line_replace.py", "sessiontree.storage.jsonl_file"): "rewriting a line rewrites the JSONL file under its writer's lock",
    ("audit/line_replace.py", "sessiontree.storage.leftovers"): "rewriting a line rewrites the JSONL file under its writer's lock",
    ("audit/row_replace.py", "sessiontree.content.blob_tables"): "the erasure marker is inserted by the SQL we own for events in our own transaction (blob_tables.insert_events, docs/architecture.md)",
    ("audit/row_replace.py", "sessiontree.storage.database_index"): "rewriting a row updates the database listing in the same transaction",
    ("audit/row_replace.py", "sessiontree.storage.index"): "rewriting a row updates the database listing in the same transaction",
    ("audit/row_replace.py", "sessiontree.storage.memory_recorder"): "rewriting a row updates the database listing in the same transaction",
    ("audit/verify.py", "sessiontree.content.blob_stores"): "verify checks that every blob a line names is there and whole",
    ("audit/verify.py", "sessiontree.content.blobs"): "verify reads the out-of-line content a line refers to",
    ("audit/verify.py", "sessiontree.pi.pi"): "verify reads pi's files of older versions (migrated in memory)",
    ("audit/verify.py", "sessiontree.retention.archive"): "verify checks archives too",
    ("audit/verify.py", "sessiontree.storage.jsonl"): "verify reads the JSONL file itself: scan, sidecar index, salvage, mapped lines",
    ("audit/verify.py", "sessiontree.storage.jsonl_index"): "verify reads the JSONL file itself: scan, sidecar index, salvage, mapped lines",
    ("audit/verify.py", "sessiontree.storage.jsonl_scan"): "verify reads the JSONL file itself: scan, sidecar index, salvage, mapped lines",
    ("audit/verify.py", "sessiontree.storage.leftovers"): "verify reads the JSONL file itself: scan, sidecar index, salvage, mapped lines",
    ("audit/verify.py", "sessiontree.storage.mapped"): "verify reads the JSONL file itself: scan, sidecar index, salvage, mapped lines",
    ("content/blob_stores.py", "sessiontree.storage.leftovers"): "a blob folder's temporary files are crash leftovers",
    ("content/blob_stores.py", "sessiontree.storage.memory_recorder"): "blob collection reads the stored lines of the in-memory recorder",
    ("pi/pi_convert.py", "sessiontree.audit.chain"): "conversion strips the chain from native lines and seals the converted ones",
    ("pi/pi_convert.py", "sessiontree.content.blob_stores"): "conversion inlines content kept out of line",
    ("pi/pi_convert.py", "sessiontree.content.blobs"): "conversion inlines content kept out of line",
    ("pi/pi_convert.py", "sessiontree.storage.jsonl"): "conversion writes a JSONL session",
    ("pi/pi_storage.py", "sessiontree.storage.jsonl"): "the pi storage is the JSONL storage with pi's dialect",
    ("pi/pi_storage.py", "sessiontree.storage.jsonl_scan"): "the pi storage is the JSONL storage with pi's dialect",
    ("retention/archive.py", "sessiontree.audit.chain"): "an archive keeps the log's chain and checkpoints",
    ("retention/archive.py", "sessiontree.audit.checkpoints"): "an archive keeps the log's chain and checkpoints",
    ("retention/archive.py", "sessiontree.content.blob_stores"): "an archive keeps the session's blobs",
    ("retention/archive.py", "sessiontree.content.blobs"): "an archive keeps the session's blobs",
    ("retention/archive.py", "sessiontree.storage.index"): "an archive folder is listed like a JSONL folder",
    ("retention/archive.py", "sessiontree.storage.jsonl_repo"): "an archive folder is listed like a JSONL folder",
    ("retention/archive.py", "sessiontree.storage.jsonl_scan"): "an archive opens as a read-only storage on the in-memory recorder",
    ("retention/archive.py", "sessiontree.storage.memory_recorder"): "an archive opens as a read-only storage on the in-memory recorder",
    ("retention/archive.py", "sessiontree.storage.recorder"): "an archive opens as a read-only storage on the in-memory recorder",
    ("retention/prune.py", "sessiontree.audit.checkpoints"): "pruning checkpoints a log before it deletes it",
    ("retention/prune.py", "sessiontree.content.blob_stores"): "pruning collects the blobs no session refers to any more",
    ("retention/prune.py", "sessiontree.content.blob_tables"): "the deletion marker is inserted by the SQL we own for events in our own transaction (blob_tables.insert_events, docs/architecture.md)",
    ("retention/prune.py", "sessiontree.storage.database"): "pruning deletes whole sessions from each kind of store",
    ("retention/prune.py", "sessiontree.storage.database_index"): "deleting from a database goes through its recorder and listing",
    ("retention/prune.py", "sessiontree.storage.folders"): "pruning refuses folders that are not sessiontree's own",
    ("retention/prune.py", "sessiontree.storage.jsonl_repo"): "pruning deletes whole sessions from each kind of store",
    ("search/search.py", "sessiontree.repository"): "the search service opens a repository (search_tool)",
    ("search/search_stores.py", "sessiontree.content.blob_stores"): "the index reads content kept out of line",
    ("search/search_stores.py", "sessiontree.content.blob_tables"): "the index reads blob rows of the database",
    ("search/search_stores.py", "sessiontree.storage.database"): "a store's search is chosen by the kind of store",
    ("search/search_stores.py", "sessiontree.storage.folders"): "the index of a JSONL folder is a cache file beside the user's others",
    ("search/search_stores.py", "sessiontree.storage.jsonl_repo"): "a store's search is chosen by the kind of store",
    ("search/search_stores.py", "sessiontree.storage.memory_recorder"): "the index catches up from the in-memory recorder",
    ("search/search_text.py", "sessiontree.content.blobs"): "what search sees of an entry includes content kept out of line",
    ("storage/database.py", "sessiontree.content.blob_tables"): "a database keeps its blobs in tables of its own",
    ("storage/jsonl.py", "sessiontree.audit.line_replace"): "erasure rewrites a line of the file (the port's replace_line)",
    ("storage/jsonl.py", "sessiontree.content.blob_stores"): "a file's pipeline outlines into its folder's blob store",
    ("storage/jsonl.py", "sessiontree.pi.pi_storage"): "a JSONL file may be pi's: the storage opens it in pi's dialect",
    ("storage/jsonl_repo.py", "sessiontree.content.blob_stores"): "a JSONL folder has its blob folder",
    ("storage/jsonl_scan.py", "sessiontree.audit.chain"): "the scan checks the chain of every line on open",
    ("storage/jsonl_scan.py", "sessiontree.content.blobs"): "salvage inlines content kept out of line",
    ("storage/jsonl_scan.py", "sessiontree.pi.pi"): "the scan reads pi's header and lines",
    ("storage/pg_sessions.py", "sessiontree.audit.row_replace"): "erasure rewrites a row with the PostgreSQL listing",
    ("storage/pipeline.py", "sessiontree.audit.chain"): "the pipeline's seal step: each line chained to the one before",
    ("storage/pipeline.py", "sessiontree.content.blobs"): "the pipeline's outline and inline steps",
    ("storage/pipeline.py", "sessiontree.content.redaction"): "the pipeline's redact step (imported when first used)",
    ("storage/recorder.py", "sessiontree.audit.line_replace"): "erasure rewrites a row (the port's replace_line)",
    ("storage/recorder.py", "sessiontree.audit.row_replace"): "erasure rewrites a row (the port's replace_line)",
    ("storage/recorder.py", "sessiontree.content.blob_tables"): "blob rows go in the transaction of the lines",
    ("storage/store.py", "sessiontree.content.blob_stores"): "a store owns its blob store",
    ("storage/store.py", "sessiontree.content.blob_tables"): "a store owns its blob store",
    ("storage/urls.py", "sessiontree.retention.archive"): "open_store('archive:...') opens a folder of archives",
}


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
def test_domain_and_projections_load_no_feature_or_serialiser(statement, tmp_path):
    """Importing the inner layers in a fresh interpreter loads no feature folder, cattrs or orjson."""
    loaded = modules_loaded_by(statement, tmp_path)
    assert "sessiontree.domain" in loaded
    assert [m for m in loaded if m.startswith(FORBIDDEN_PREFIXES)] == []


def test_the_package_still_exports_storage_backed_names(tmp_path):
    """``from sessiontree import Session, InMemorySessionStorage`` works (loaded on first use)."""
    loaded = modules_loaded_by("from sessiontree import Session, InMemorySessionStorage", tmp_path)
    assert "sessiontree.storage.recorder" in loaded


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
    """The modules ``path`` imports (``from sessiontree.storage import jsonl`` imports sessiontree.storage.jsonl)."""
    packages = {"sessiontree", *(f"sessiontree.{f}" for f in FEATURES)}
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found += [node.module] if node.module not in packages else [f"{node.module}.{a.name}" for a in node.names]
    return found


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def test_each_layer_imports_only_inward():
    """Statically: domain/ names no other layer; projections/ only the domain; no feature folder the application
    (repositories live in the application and wrap the features' stores, not the other way round)."""
    assert "sessiontree.session" in APPLICATION and "sessiontree.repository" in APPLICATION
    features = tuple(f"sessiontree.{f}" for f in FEATURES)
    rules = {"domain": ("sessiontree.projections", *features, *APPLICATION), "projections": (*features, *APPLICATION)}
    offenders = [
        f"{path.relative_to(ROOT)}: {name}"
        for folder, banned in rules.items()
        for path in (ROOT / folder).rglob("*.py")
        for name in _imports(path)
        if _within(name, banned)
    ]
    assert offenders == []


def _feature_edges() -> set[tuple[str, str]]:
    found = set()
    for folder in FEATURES:
        own = (f"sessiontree.{folder}",)
        others = tuple(f"sessiontree.{f}" for f in FEATURES if f != folder)
        for path in sorted((ROOT / folder).rglob("*.py")):
            for name in _imports(path):
                if not _within(name, own + SHARED + PORT) and _within(name, others + APPLICATION):
                    found.add((path.relative_to(ROOT).as_posix(), name))
    return found


def test_a_feature_imports_no_other_features_internals():
    """A feature folder imports the domain, the projections, the wire format, the storage port and itself; every
    other edge is in ALLOWED with its reason."""
    assert set(FEATURES) <= {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()}
    found = _feature_edges()
    assert sorted(found - set(ALLOWED)) == [], "a feature imports another's internals: go through the port"
    assert sorted(set(ALLOWED) - found) == [], "ALLOWED lists edges the code no longer has: delete them"
