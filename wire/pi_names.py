"""pi's wire names, each written once: the camelCase keys, role and block names, and key order of pi's files.

The pi dialect with its migration of old files (``pi.py``) and the typed envelopes every other
module reads a line through (the end of ``schema.py``) take them from here; tests/test_wire_names.py checks that no
other module spells one. A module of its own, importing nothing, because ``pi.py`` imports the codec, which the
readers of lines (the chain, the scan) may not.
"""

from __future__ import annotations

PARENT_KEY = "parentId"  # an entry's parent
PARENT_SESSION_KEY = "parentSession"  # a header's: the session it was forked from
CUSTOM_TYPE_KEY = "customType"
FROM_ID_KEY = "fromId"  # a branch summary's, and a leaf marker's ``data``: the leaf moved from
TARGET_ID_KEY = "targetId"  # a label's target
TOOL_NAME_KEY = "toolName"
THINKING_SIGNATURE_KEY = "thinkingSignature"
FIRST_KEPT_ENTRY_ID_KEY = "firstKeptEntryId"
FIRST_KEPT_ENTRY_INDEX_KEY = "firstKeptEntryIndex"  # version 1's (the header counts as 0)
HOOK_MESSAGE_ROLE = "hookMessage"  # version 2's name of the ``custom`` role
LEAF_MARKER_TYPE = "sessiontree/leaf"  # the ``customType`` of the ``custom`` entry that records a leaf move
TOOL_RESULT_ROLE = "toolResult"
TOOL_CALL_BLOCK = "toolCall"
ROLES = {"tool_result": TOOL_RESULT_ROLE, "compaction_summary": "compactionSummary", "branch_summary": "branchSummary"}
BLOCKS = {"tool_call": TOOL_CALL_BLOCK}

# pi's writer's key order, in wire names.
_BASE = ("type", "id", PARENT_KEY, "timestamp")
KEY_ORDER: dict[str, tuple[str, ...]] = {
    "message": (*_BASE, "message"),
    "thinking_level_change": (*_BASE, "thinkingLevel"),
    "model_change": (*_BASE, "provider", "modelId"),
    "active_tools_change": (*_BASE, "activeToolNames"),
    "compaction": (*_BASE, "summary", FIRST_KEPT_ENTRY_ID_KEY, "tokensBefore", "details", "usage", "fromHook",
                   "retainedTail"),
    "branch_summary": (*_BASE, FROM_ID_KEY, "summary", "details", "usage", "fromHook"),
    "custom": ("type", CUSTOM_TYPE_KEY, "data", "id", PARENT_KEY, "timestamp"),
    "custom_message": ("type", CUSTOM_TYPE_KEY, "content", "display", "details", "id", PARENT_KEY, "timestamp"),
    "label": (*_BASE, TARGET_ID_KEY, "label"),
    "session_info": (*_BASE, "name"),
    "user": ("role", "content", "timestamp"),
    "assistant": ("role", "content", "api", "provider", "model", "usage", "stopReason", "timestamp", "errorMessage"),
    TOOL_RESULT_ROLE: ("role", "toolCallId", TOOL_NAME_KEY, "content", "details", "isError", "timestamp"),
    "custom_role": ("role", CUSTOM_TYPE_KEY, "content", "display", "details", "timestamp"),
    "compactionSummary": ("role", "summary", "tokensBefore", "timestamp"),
    "branchSummary": ("role", "summary", FROM_ID_KEY, "timestamp"),
    "image": ("type", "data", "mimeType"),
    "thinking": ("type", "thinking", THINKING_SIGNATURE_KEY),
    TOOL_CALL_BLOCK: ("type", "id", "name", "arguments"),
    "Usage": ("input", "output", "cacheRead", "cacheWrite", "totalTokens", "cost"),
    "Cost": ("input", "output", "cacheRead", "cacheWrite", "total"),
}
