"""Small builders of conversations, shared by the pydantic-ai store's conformance tests (their ``repo`` and ``store``
fixtures are in this folder's conftest.py)."""

from __future__ import annotations

import asyncio
import sys
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

from pydantic_ai.conversation import Conversation
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart

from sessiontree.integrations.pydantic_ai import SessionTreeConversationStore


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def cid() -> str:
    return f"conv-{uuid.uuid4().hex[:12]}"  # unique per test, so PostgreSQL runs never meet


def turn(question: str, answer: str) -> list[Any]:
    return [ModelRequest.user_text_prompt(question), ModelResponse(parts=[TextPart(answer)])]


async def saved(store: SessionTreeConversationStore, conversation_id: str, *turns: tuple[str, str], scope: str | None = None
                ) -> Conversation:
    """A conversation saved turn by turn, as an app saves after each run; returned as loaded."""
    conversation = Conversation(conversation_id=conversation_id)
    for question, answer in turns:
        conversation.messages.extend(turn(question, answer))
        await store.save(conversation, scope=scope)
    loaded = await store.load(conversation_id, scope=scope)
    assert loaded is not None
    return loaded


def texts(conversation: Conversation | None) -> list[str]:
    assert conversation is not None
    out = []
    for message in conversation.messages:
        part = message.parts[0]
        out.append(getattr(part, "content", ""))
    return out
