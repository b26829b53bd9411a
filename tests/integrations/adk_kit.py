"""An offline ADK model for the session service's tests: ``ScriptedLlm`` answers each model call with the next scripted
response (a function call or text), and records the requests it was sent."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types
from pydantic import Field, PrivateAttr


def say(text: str) -> types.Content:
    return types.Content(role="model", parts=[types.Part(text=text)])


def call(name: str, **args: Any) -> types.Content:
    return types.Content(role="model", parts=[types.Part(function_call=types.FunctionCall(name=name, args=args))])


def user(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


class ScriptedLlm(BaseLlm):
    model: str = "scripted"
    script: list[types.Content] = Field(default_factory=list)
    _requests: list[LlmRequest] = PrivateAttr(default_factory=list)

    async def generate_content_async(self, llm_request: LlmRequest, stream: bool = False) -> AsyncGenerator[LlmResponse, None]:
        self._requests.append(llm_request)
        yield LlmResponse(content=self.script.pop(0))

    @property
    def requests(self) -> list[LlmRequest]:
        return self._requests

    def texts_sent(self, n: int = -1) -> list[str]:
        """The texts of every part of the n-th request's contents."""
        return [p.text for c in self._requests[n].contents for p in (c.parts or []) if p.text]


def get_weather(city: str) -> dict[str, str]:
    """The weather in a city."""
    return {"city": city, "weather": "sunny"}


def weather_agent(model: ScriptedLlm) -> LlmAgent:
    return LlmAgent(name="weather", model=model, instruction="Answer briefly.", tools=[get_weather],
                    output_key="last_answer")
