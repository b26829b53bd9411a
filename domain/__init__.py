"""The domain: messages, entry events, the session aggregate and its errors.

Nothing here does I/O or imports a serialiser.
"""

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

__all__ = [
    "AssistantMessage",
    "BranchSummaryMessage",
    "CompactionSummaryMessage",
    "Cost",
    "CustomMessage",
    "ImageContent",
    "SessionError",
    "TextContent",
    "ThinkingContent",
    "ToolCall",
    "ToolResultMessage",
    "UnknownContent",
    "UnknownMessage",
    "Usage",
    "UserMessage",
]
