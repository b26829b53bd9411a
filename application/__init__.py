"""sessiontree: an append-only, event-sourced tree log of LLM agent conversations.

The public API (SPEC section 7). Layers: ``sessiontree.domain`` (events, aggregate, no
I/O), ``sessiontree.projections`` (pure folds), one folder per feature (``sessiontree.storage``, ``.audit``, ...).
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from sessiontree import seed as _seed
from sessiontree.compaction import Summary, extractive_summary
from sessiontree.domain.errors import SessionError
from sessiontree.domain.messages import (
    AssistantMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    Cost,
    CustomMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UnknownContent,
    UnknownMessage,
    Usage,
    UserMessage,
)
from sessiontree.projections.base import FunctionProjection, Projection
from sessiontree.projections.compaction import CharEstimator, CompactionPlan, ContextTokens, TextCounterEstimator
from sessiontree.projections.context import ContextMessages, SessionContext, SessionContextBuildOptions, build_session_context
from sessiontree.projections.stats import SessionStats
from sessiontree.projections.tool_pairs import ContextProblem, repair_tool_pairs
from sessiontree.seed import (
    ActiveToolsChangeEntry,
    BranchSummaryEntry,
    CompactionEntry,
    CustomEntry,
    CustomMessageEntry,
    LabelEntry,
    LeafEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionHeader,
    SessionInfoEntry,
    SessionTreeEntry,
    ThinkingLevelChangeEntry,
    open_session,
)

# Names that live in (or import) the feature folders are loaded on first use (PEP 562):
# ``import sessiontree.domain`` imports this package first, and the layer rule says the
# domain and projections load no feature folder or serialiser (tests/test_layers.py checks it).
# Add new exports of the feature folders here, not as imports above.
_LAZY_MODULES: dict[str, tuple[str, ...]] = {
    "sessiontree.audit.checkpoints": ("Checkpoint", "sign_checkpoint"),
    "sessiontree.storage.jsonl": ("JsonlSessionStorage",),
    "sessiontree.storage.recorder": ("InMemorySessionStorage",),
    "sessiontree.storage.storage": ("SessionStorage",),
    "sessiontree.storage.store": ("SessionInfo",),
    "sessiontree.audit.verify": ("VerifyReport", "verify"),
    "sessiontree.reader": ("ReplayStep", "SessionView", "TreeNode"),
    "sessiontree.repository": ("DatabaseSessionRepo", "InMemorySessionRepo", "JsonlSessionRepo", "SessionRepo", "open_repo"),
    "sessiontree.search.search": ("SearchHit", "search_tool"),
    "sessiontree.session": ("ContextRepairWarning", "Session"),
    "sessiontree.retention.prune": ("PruneError", "PruneResult", "PrunedSession", "parse_age"),
    "sessiontree.retention.archive": ("ArchiveSessionStorage",),
}
_LAZY = {name: module for module, names in _LAZY_MODULES.items() for name in names}

if TYPE_CHECKING:
    from sessiontree.audit.checkpoints import Checkpoint, sign_checkpoint
    from sessiontree.audit.verify import VerifyReport, verify
    from sessiontree.reader import ReplayStep, SessionView, TreeNode
    from sessiontree.repository import DatabaseSessionRepo, InMemorySessionRepo, JsonlSessionRepo, SessionRepo, open_repo
    from sessiontree.retention.archive import ArchiveSessionStorage
    from sessiontree.retention.prune import PrunedSession, PruneError, PruneResult, parse_age
    from sessiontree.search.search import SearchHit, search_tool
    from sessiontree.session import ContextRepairWarning, Session
    from sessiontree.storage.jsonl import JsonlSessionStorage
    from sessiontree.storage.recorder import InMemorySessionStorage
    from sessiontree.storage.storage import SessionStorage
    from sessiontree.storage.store import SessionInfo


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        if name in _seed.__all__:  # the seed's free functions, for ported code (docs/porting.md)
            return getattr(_seed, name)
        raise AttributeError(f"module 'sessiontree' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY, *_seed.__all__})


# Where to start (docs/architecture.md): repositories and sessions, messages and content, the entry classes, errors,
# projections and verify. Everything else stays importable from here or from its module: the seed's free functions
# (``sessiontree.append_message(session, ...)``) live in ``sessiontree.seed`` (docs/porting.md), the storages, the
# summariser, the estimators and retention in their modules.
__all__ = [  # noqa: RUF022 - grouped by what they are for, not sorted
    # repositories and sessions
    "DatabaseSessionRepo", "InMemorySessionRepo", "InMemorySessionStorage", "JsonlSessionRepo", "JsonlSessionStorage",
    "Session", "SessionError", "SessionInfo", "SessionRepo", "SessionView", "open_repo", "open_session",
    # messages and content
    "AssistantMessage", "BranchSummaryMessage", "CompactionSummaryMessage", "Cost", "CustomMessage", "ImageContent",
    "TextContent", "ThinkingContent", "ToolCall", "ToolResultMessage", "Usage", "UserMessage",
    # the entries of the tree (the seed's names)
    "ActiveToolsChangeEntry", "BranchSummaryEntry", "CompactionEntry", "CustomEntry", "CustomMessageEntry", "LabelEntry",
    "LeafEntry", "MessageEntry", "ModelChangeEntry", "SessionHeader", "SessionInfoEntry", "SessionTreeEntry",
    "ThinkingLevelChangeEntry",
    # projections and the context
    "FunctionProjection", "Projection", "SessionContext", "SessionContextBuildOptions", "SessionStats", "TreeNode",
    # tool calls and results (docs/concepts.md)
    "ContextProblem", "ContextRepairWarning", "repair_tool_pairs",
    # audit
    "VerifyReport", "verify",
]
