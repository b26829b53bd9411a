"""sessiontree: an append-only, event-sourced tree log of LLM agent conversations.

The public API (SPEC section 7). Layers: ``sessiontree.domain`` (events, aggregate, no
I/O), ``sessiontree.projections`` (pure folds), ``sessiontree.adapters`` (storage).
"""

from sessiontree.adapters.memory import InMemorySessionStorage
from sessiontree.adapters.storage import SessionStorage
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
from sessiontree.projections.context import SessionContext, SessionContextBuildOptions
from sessiontree.projections.stats import SessionStats
from sessiontree.session import ReplayStep, Session, SessionView, TreeNode

__all__ = [
    "AssistantMessage",
    "BranchSummaryMessage",
    "CompactionSummaryMessage",
    "Cost",
    "CustomMessage",
    "FunctionProjection",
    "ImageContent",
    "InMemorySessionStorage",
    "Projection",
    "ReplayStep",
    "Session",
    "SessionContext",
    "SessionContextBuildOptions",
    "SessionError",
    "SessionStats",
    "SessionStorage",
    "SessionView",
    "TextContent",
    "ThinkingContent",
    "ToolCall",
    "ToolResultMessage",
    "TreeNode",
    "UnknownContent",
    "UnknownMessage",
    "Usage",
    "UserMessage",
]
