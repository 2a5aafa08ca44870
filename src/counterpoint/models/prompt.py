"""Request building: prompt layout, structured-output schemas and tool-call emulation.

Layout favours serving engines' prefix caches: the stable parts come first and in
a deterministic order (system prompt, tool definitions sorted by name, shared
context), per-call content last. Two calls of one run that share a system
prompt, tools and context therefore share a token prefix byte for byte.

Providers without native tool choice get tools through structured output: the
answer must be ``{"calls": [{"name": ..., "arguments": {...}}], "content": ...}``
with each call's arguments constrained by that tool's schema. Providers without
native schemas get the schema in the system prompt.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import pydantic

from .provider import Capabilities
from .types import Message, OutputSpec, ToolCall, ToolSpec

EMULATED_TOOLS = "tool_calls"


def layout(*, system: str | None, context: Sequence[str], messages: Sequence[Message],
           tools: Sequence[ToolSpec]) -> tuple[tuple[Message, ...], tuple[ToolSpec, ...]]:
    """Messages and tools in cache-friendly order (see the module docstring)."""
    ordered_tools = tuple(sorted(tools, key=lambda t: t.name))
    head: list[Message] = []
    stable = [s for s in (system, *context) if s]
    if stable:
        head.append(Message.system("\n\n".join(stable)))
    return (*head, *messages), ordered_tools


@lru_cache(maxsize=256)
def _adapter(annotation: Any) -> pydantic.TypeAdapter[Any]:
    return pydantic.TypeAdapter(annotation)


class OutputShape:
    """How a Python output type is asked for and read back."""

    def __init__(self, annotation: Any) -> None:
        self.annotation = annotation
        self.adapter = _adapter(annotation)
        schema = self.adapter.json_schema()
        # providers want an object at the root; other types travel as {"value": ...}
        self.wrapped = schema.get("type") != "object"
        if self.wrapped:
            defs = schema.pop("$defs", None)
            schema = {"type": "object", "properties": {"value": schema}, "required": ["value"]}
            if defs:
                schema["$defs"] = defs
        name = getattr(annotation, "__name__", None) or "output"
        self.spec = OutputSpec(name="".join(c for c in name if c.isalnum() or c in "_-")[:64]
                               or "output", schema=schema)

    def parse(self, text: str) -> Any:
        """The validated value; raises ``pydantic.ValidationError`` or ``ValueError``."""
        text = _strip_fences(text)
        if self.wrapped:
            data = _loads(text)
            if not isinstance(data, dict) or "value" not in data:
                raise ValueError('expected an object with a "value" key')
            return self.adapter.validate_python(data["value"])
        try:
            return self.adapter.validate_json(text)
        except pydantic.ValidationError as exc:
            if exc.errors()[0]["type"] != "json_invalid":
                raise
            try:  # raw newlines or tabs inside strings: small models write them
                data = _loads(text)
            except json.JSONDecodeError:
                raise exc from None
            return self.adapter.validate_python(data)


def without_string_bounds(spec: OutputSpec) -> OutputSpec:
    """``spec`` without ``maxLength`` anywhere in its schema (see
    :attr:`Capabilities.string_bounds`)."""
    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            # a keyword's value is a number; a property called maxLength has a schema
            return {k: strip(v) for k, v in node.items()
                    if not (k == "maxLength" and isinstance(v, int))}
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node
    return OutputSpec(name=spec.name, schema=strip(spec.schema_))


def schema_instruction(spec: OutputSpec) -> str:
    return ("Answer with one JSON value only, no prose, matching this JSON schema:\n"
            + json.dumps(spec.schema_, sort_keys=True))


def emulate_tools(tools: Sequence[ToolSpec], choice: str) -> OutputSpec:
    """A schema whose answers are tool calls, for providers without native tool choice."""
    allowed = [t for t in tools if choice in ("auto", "required") or t.name == choice]
    options = [{"type": "object", "properties": {"name": {"const": t.name},
                                                 "arguments": t.parameters},
                "required": ["name", "arguments"]} for t in allowed]
    calls: dict[str, Any] = {"type": "array", "items": {"anyOf": options}}
    properties: dict[str, Any] = {"calls": calls}
    if choice == "auto":
        properties["content"] = {"type": "string"}  # the answer when no tool is called
    else:
        calls["minItems"] = 1
    return OutputSpec(name=EMULATED_TOOLS, schema={
        "type": "object", "properties": properties, "required": ["calls"]})


def tools_instruction(tools: Sequence[ToolSpec], choice: str) -> str:
    lines = [f"- {t.name}: {t.description} arguments schema: "
             f"{json.dumps(t.parameters, sort_keys=True)}" for t in tools]
    if choice == "auto":
        form = '{"calls": [{"name": TOOL, "arguments": {...}}], "content": TEXT}'
        must = "Call tools when they help; otherwise answer in content with calls empty."
    else:
        form = '{"calls": [{"name": TOOL, "arguments": {...}}]}'
        must = "You must call at least one tool."
    return (f"You can call these tools by answering with JSON {form}.\n"
            + "\n".join(lines) + "\n" + must)


def read_emulated(text: str, tools: Sequence[ToolSpec]) -> tuple[str, tuple[ToolCall, ...]]:
    """Content and tool calls from an emulated answer; raises ``ValueError`` if invalid."""
    data = json.loads(_strip_fences(text))
    if not isinstance(data, dict) or not isinstance(data.get("calls", []), list):
        raise ValueError('expected {"calls": [...], "content": ...}')
    names = {t.name for t in tools}
    calls = []
    for i, call in enumerate(data.get("calls", [])):
        if not isinstance(call, dict) or call.get("name") not in names:
            raise ValueError(f"call {i} names no known tool (known: {sorted(names)})")
        args = call.get("arguments", {})
        if not isinstance(args, dict):
            raise ValueError(f"call {i}: arguments must be an object")
        calls.append(ToolCall(id=f"call_{i}_{call['name']}", name=call["name"], arguments=args))
    return str(data.get("content") or ""), tuple(calls)


def adapt(messages: Sequence[Message], caps: Capabilities) -> tuple[Message, ...]:
    """Messages a provider accepts: without native tools, tool turns become plain text;
    without system messages, the system prompt opens the first user turn."""
    if not caps.tools:
        messages = [_as_text(m) for m in messages]
    if caps.system_messages:
        return tuple(messages)
    system = "\n\n".join(m.content for m in messages if m.role == "system")
    rest = [m for m in messages if m.role != "system"]
    if system and rest and rest[0].role == "user":
        rest[0] = Message.user(f"{system}\n\n{rest[0].content}")
    elif system:
        rest.insert(0, Message.user(system))
    return tuple(rest)


def _loads(text: str) -> Any:
    """JSON that may hold raw control characters inside strings."""
    return json.loads(text, strict=False)


def _strip_fences(text: str) -> str:
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = stripped.split("\n", 1)[1] if "\n" in stripped else ""
        stripped = stripped.rsplit("```", 1)[0]
    return stripped.strip()


def _as_text(message: Message) -> Message:
    if message.role == "tool":
        return Message.user(f"Result of {message.name or 'the tool'}: {message.content}")
    if message.role == "assistant" and message.tool_calls:
        calls = "; ".join(f"{c.name}({json.dumps(c.arguments, sort_keys=True)})"
                          for c in message.tool_calls)
        return Message.assistant(f"{message.content}\nCalled: {calls}".strip())
    return message
