"""What ``counterpoint show RUN --calls`` prints: one row per model call, and with
``--full`` (or ``--call N``) each call's prompt and answer, read back from the blob
store by the hashes its ``model_call`` event records.

A call is named by the sequence number of its event in the run's log (the ``call``
column). Text is passed through :func:`~counterpoint.secrets.redact` before it is
shown: the log never stores an API key, and a key that reached a prompt is hidden too.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..events import Event
from ..secrets import redact
from .render import clock, seconds

Blobs = Callable[[str], str | None]
"""Reads a blob by its hash (``None`` when it is not stored)."""


def calls_table(events: Sequence[Event]) -> RenderableType:
    """One row per model call (and per failed attempt or cache hit) of a run."""
    if not events:
        return Text("no model calls", style="dim")
    table = Table(box=None, pad_edge=False, title="model calls", title_justify="left",
                  title_style="bold")
    for column in ("call", "time", "node", "model", "tokens in/out", "cost", "latency",
                   "ttft", "result"):
        table.add_column(column, justify="right" if column in (
            "call", "tokens in/out", "cost", "latency", "ttft") else "left")
    for ev in events:
        d = ev.data or {}
        tokens = f"{d['input_tokens']:,}/{d['output_tokens']:,}" if "input_tokens" in d else ""
        cost = "" if d.get("cost") is None or d.get("reused") else f"${d['cost']:.5f}"
        table.add_row(str(ev.seq), clock(ev.at), str(ev.node or ""), str(d.get("model", "")),
                      tokens, cost, seconds(d["latency"]) if d.get("latency") is not None
                      else "", seconds(d["ttft"]) if d.get("ttft") is not None else "",
                      _result(d))
    return table


def _result(d: Mapping[str, Any]) -> Text:
    if "error" in d:
        return Text(f"{d.get('error_type', 'error')}: {d['error']}"[:90], style="red")
    if "invalid_output" in d:
        done = "gave up" if d.get("gave_up") else "re-asked"
        return Text(f"invalid output, {done}: {d['invalid_output']}"[:90], style="yellow")
    if d.get("reused"):  # a fork's copy of its parent's call: not sent, not paid again
        return Text(f"reused from {d['reused'].get('run')}", style="cyan")
    if d.get("cache_hit"):
        return Text("from cache", style="cyan")
    return Text(f"{d.get('finish', 'stop')}"
                + (f", {d['tool_calls']} tool call(s)" if d.get("tool_calls") else ""),
                style="green")


def _load(blobs: Blobs, digest: Any) -> dict[str, Any] | None:
    if not isinstance(digest, str):
        return None
    text = blobs(digest)
    if text is None:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def call_record(ev: Event, blobs: Blobs) -> dict[str, Any]:
    """A call as JSON: its event's data, with ``prompt`` and ``answer`` read from the
    blob store (``None`` when not stored), secrets redacted."""
    data = dict(ev.data or {})
    request = _load(blobs, data.get("request"))
    response = _load(blobs, data.get("response"))
    record: dict[str, Any] = {"call": ev.seq, "at": ev.at, "node": ev.node, **data,
                              "prompt": None, "answer": None}
    if request is not None:
        record["prompt"] = {"messages": request.get("messages", []),
                            "tools": [t.get("name") for t in request.get("tools", ())],
                            "output": (request.get("output") or {}).get("name")}
    if response is not None:
        record["answer"] = {"text": response.get("text", ""),
                            "tool_calls": response.get("tool_calls", []),
                            "refusal": response.get("refusal")}
    redacted: dict[str, Any] = _redacted(record)
    return redacted


def _redacted(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _redacted(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redacted(v) for v in value]
    return value


def call_view(ev: Event, blobs: Blobs) -> RenderableType:
    """One call in full: what it cost, the prompt's messages, the answer."""
    record = call_record(ev, blobs)
    head = Text.assemble(("call ", "bold"), (str(ev.seq), "bold"), f"  {clock(ev.at)}  node ",
                         (str(ev.node or "-"), "bold"), f"  model {record.get('model', '?')}  ",
                         _result(record))
    parts: list[RenderableType] = [head]
    if "input_tokens" in record:
        parts.append(Text(f"  {record['input_tokens']:,} in / {record['output_tokens']:,} out "
                          "tokens" + (f", {seconds(record['latency'])}"
                                      if record.get("latency") is not None else ""),
                          style="dim"))
    prompt = record["prompt"]
    parts.append(Text("  prompt", style="bold"))
    if prompt is None:
        parts.append(Text("    (not stored: the run's store kept no copy of it)", style="dim"))
    else:
        for message in prompt["messages"]:
            parts.extend(_message(message))
        if prompt["tools"]:
            parts.append(Text(f"    tools offered: {', '.join(map(str, prompt['tools']))}",
                              style="dim"))
        if prompt["output"]:
            parts.append(Text(f"    structured output: {prompt['output']}", style="dim"))
    answer = record["answer"]
    if answer is not None:
        parts.append(Text("  answer", style="bold"))
        if answer["text"]:
            parts.append(_indented(str(answer["text"]), 4))
        for call in answer["tool_calls"] or ():
            parts.append(Text(f"    -> {_tool_call(call)}", style="cyan"))
        if answer["refusal"]:
            parts.append(Text(f"    refused: {answer['refusal']}", style="yellow"))
        if not (answer["text"] or answer["tool_calls"] or answer["refusal"]):
            parts.append(Text("    (empty)", style="dim"))
    elif "error" not in record and "invalid_output" not in record:
        parts.append(Text("  answer (not stored)", style="dim"))
    return Group(*parts)


def _message(message: Mapping[str, Any]) -> list[RenderableType]:
    role = str(message.get("role", "?"))
    if message.get("tool_call_id"):
        role += f" ({message['tool_call_id']})"
    lines: list[RenderableType] = [Text(f"    {role}:", style="magenta")]
    content = str(message.get("content") or "")
    if content:
        lines.append(_indented(content, 6))
    for call in message.get("tool_calls") or ():
        lines.append(Text(f"      -> {_tool_call(call)}", style="cyan"))
    return lines


def _tool_call(call: Mapping[str, Any]) -> str:
    return f"{call.get('name', '?')}({json.dumps(call.get('arguments', {}), ensure_ascii=False)})"


def _indented(text: str, by: int) -> Text:
    pad = " " * by
    return Text("\n".join(pad + line for line in text.splitlines() or [""]))
