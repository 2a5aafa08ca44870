"""Span attribute names and values: the OpenTelemetry GenAI conventions, and ours.

The ``gen_ai.*`` names follow the GenAI semantic conventions as of
opentelemetry-semantic-conventions 0.66 (``gen_ai.provider.name``,
``gen_ai.input.messages``, ...); they are spelled out here rather than imported from
that package's ``_incubating`` module, whose names may move between releases. Names
that are counterpoint's own start with ``counterpoint.``.

Message content follows the conventions' JSON form (a list of messages, each with a
``role`` and typed ``parts``); it is only recorded when content capture is on, and it
is redacted of configured secrets first (:mod:`counterpoint.secrets`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..secrets import redact

OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHE_READ_TOKENS = "gen_ai.usage.cache_read.input_tokens"
TIME_TO_FIRST_CHUNK = "gen_ai.response.time_to_first_chunk"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
AGENT_NAME = "gen_ai.agent.name"
WORKFLOW_NAME = "gen_ai.workflow.name"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
ERROR_TYPE = "error.type"

CHAT = "chat"
EXECUTE_TOOL = "execute_tool"
INVOKE_AGENT = "invoke_agent"
INVOKE_WORKFLOW = "invoke_workflow"

RUN_ID = "counterpoint.run_id"
PARENT_RUN_ID = "counterpoint.parent_run_id"
GRAPH = "counterpoint.graph"
NODE = "counterpoint.node"
ATTEMPT = "counterpoint.attempt"
STATUS = "counterpoint.status"
ERROR = "counterpoint.error"
SCOPE = "counterpoint.agent.scope"

PROVIDERS = {"openai": "openai", "anthropic": "anthropic", "local": "llama_cpp",
             "OpenAIProvider": "openai", "AnthropicProvider": "anthropic",
             "LocalProvider": "llama_cpp"}
"""counterpoint's provider kinds (and the classes of provider objects given directly) ->
the conventions' ``gen_ai.provider.name``; any other kind is reported as it is."""


def provider_name(kind: str | None) -> str:
    return PROVIDERS.get(kind or "", kind or "unknown")


def input_messages(request: Mapping[str, Any]) -> tuple[str | None, str]:
    """A recorded request's system instructions (or ``None``) and its messages, as the
    conventions' JSON."""
    system: list[str] = []
    messages: list[dict[str, Any]] = []
    for message in request.get("messages") or ():
        role = message.get("role", "user")
        content = message.get("content") or ""
        if role == "system":
            system.append(content)
            continue
        parts: list[dict[str, Any]] = []
        if role == "tool":
            parts.append({"type": "tool_call_response", "id": message.get("tool_call_id"),
                          "response": content})
        elif content:
            parts.append({"type": "text", "content": content})
        parts.extend(_tool_calls(message.get("tool_calls") or ()))
        messages.append({"role": role, "parts": parts})
    instructions = None if not system else _json(
        [{"type": "text", "content": text} for text in system])
    return instructions, _json(messages)


def output_messages(response: Mapping[str, Any]) -> str:
    """A recorded response as the conventions' output messages JSON."""
    parts: list[dict[str, Any]] = []
    if response.get("text"):
        parts.append({"type": "text", "content": response["text"]})
    parts.extend(_tool_calls(response.get("tool_calls") or ()))
    return _json([{"role": "assistant", "parts": parts,
                   "finish_reason": response.get("finish_reason", "stop")}])


def _tool_calls(calls: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": "tool_call", "id": c.get("id"), "name": c.get("name"),
             "arguments": c.get("arguments")} for c in calls]


def _json(value: Any) -> str:
    return redact(json.dumps(value, ensure_ascii=False, default=str))


def text(value: Any) -> str:
    """``value`` as an attribute string (JSON unless it is one), secrets redacted."""
    return redact(value if isinstance(value, str) else json.dumps(value, default=str))
