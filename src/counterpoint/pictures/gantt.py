"""A static Gantt chart of a recorded run: each node's attempts over time, from its log.

:func:`timeline` folds a run's events into one :class:`Row` per node: the time it was
ready but waiting for a slot or resource (``queued``), each attempt (``run``, with how
it ended) and the back-off before a retry (``backoff``). :func:`gantt_svg` draws it as a
self-contained SVG, the critical path outlined; :func:`gantt_html` wraps that in a page
for reports. Nothing is imported from the graph's code: the log is enough.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..events import Event, EventKind
from ..ids import NodeId
from .svg import FONT, text_width, xml_text

ROWS = 400
"""Most node rows drawn; a longer run says how many were left out."""
ROW_H = 22
BAR_H = 14
AXIS = 28

COLOURS = {"succeeded": "#2f9e44", "failed": "#e03131", "cancelled": "#f08c00",
           "running": "#1c7ed6", "interrupted": "#868e96", "fallback": "#e03131"}
WAIT = {"queued": ("#d0ebff", "ready, waiting for a slot or resource"),
        "backoff": ("#ffe3e3", "waiting to retry (back-off)"),
        "approval": ("#ffd43b", "waiting for a person (an approval)")}
"""Stretches of waiting, drawn thinner than attempts; ``approval`` lies over the attempt
that asked (the node holds no slot meanwhile)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Bar:
    """One stretch of a node's time."""

    kind: str
    """``run`` (an attempt), ``queued``, ``backoff`` or ``approval``."""
    start: float
    end: float
    attempt: int
    outcome: str = ""
    """How an attempt ended: succeeded, failed, cancelled, or running / interrupted when
    the log ends first."""
    error: str = ""


@dataclass(kw_only=True, slots=True)
class Row:
    """One node's bars, in time order."""

    node: NodeId
    status: str = "pending"
    bars: list[Bar] = field(default_factory=list)
    first: float = 0.0


@dataclass(frozen=True, kw_only=True, slots=True)
class Timeline:
    """A run's rows, between its start and ``end`` (its finish, or the last moment known)."""

    run_id: str
    graph: str
    status: str
    start: float
    end: float
    rows: tuple[Row, ...]
    critical: frozenset[NodeId]
    note: str = ""
    """Said above the chart: an unfinished run is drawn up to ``end``."""


_ENDS = {EventKind.NODE_SUCCEEDED: "succeeded", EventKind.NODE_FAILED: "failed",
         EventKind.NODE_CANCELLED: "cancelled"}


def timeline(run_id: str, events: Sequence[Event], *, critical: Iterable[NodeId] = (),
             live: bool = False, now: float | None = None) -> Timeline:
    """The rows of run ``run_id`` from its whole log.

    A run without a ``run_finished`` event is drawn up to ``now`` when ``live`` (its
    process is still running it), else up to its last event (its process died); its
    unfinished attempts end there as ``running`` or ``interrupted``.
    """
    rows: dict[NodeId, Row] = {}
    open_run: dict[NodeId, tuple[float, int]] = {}
    waiting: dict[NodeId, tuple[str, float]] = {}
    asks: dict[tuple[NodeId, str], tuple[float, int]] = {}  # (node, approval) -> since
    graph, status, start, finished = "?", "running", 0.0, None
    for ev in events:
        kind, node, data = ev.kind, ev.node, ev.data or {}
        if kind is EventKind.RUN_CREATED:
            graph, start = str(data.get("graph", "?")), ev.at
        elif kind is EventKind.RUN_FINISHED:
            status, finished = str(data.get("status", "failed")), ev.at
        elif kind is EventKind.RUN_RESUMED:
            for key, (began, attempt) in open_run.items():  # the process died meanwhile
                rows[key].bars.append(Bar(kind="run", start=began, end=ev.at,
                                          attempt=attempt, outcome="interrupted"))
            open_run.clear()
            waiting.clear()
            for (key, _), (since, attempt) in asks.items():
                rows[key].bars.append(Bar(kind="approval", start=since, end=ev.at,
                                          attempt=attempt))
            asks.clear()
        if node is None:
            continue
        row = rows.get(node)
        if row is None:
            row = rows[node] = Row(node=node, first=ev.at)
        if kind is EventKind.NODE_READY:
            waiting[node] = ("queued", ev.at)
            row.status = "ready"
        elif kind is EventKind.NODE_STARTED:
            wait = waiting.pop(node, None)
            if wait is not None and ev.at > wait[1]:
                row.bars.append(Bar(kind=wait[0], start=wait[1], end=ev.at, attempt=ev.attempt))
            open_run[node] = (ev.at, ev.attempt)
            row.status = "running"
        elif kind in _ENDS:
            began, attempt = open_run.pop(node, (ev.at, ev.attempt))
            outcome = _ENDS[kind]
            error = f"{data.get('type', '')}: {data.get('message', '')}" \
                if kind is EventKind.NODE_FAILED else ""
            row.bars.append(Bar(kind="run", start=began, end=ev.at, attempt=attempt,
                                outcome=outcome, error=error))
            final = kind is not EventKind.NODE_FAILED or bool(data.get("final"))
            row.status = outcome if final else "retrying"
            if not final and not data.get("fallback"):
                waiting[node] = ("backoff", ev.at)
        elif kind is EventKind.APPROVAL_REQUESTED:
            asks[node, str(data.get("id"))] = (ev.at, ev.attempt or 0)
        elif kind is EventKind.APPROVAL_ANSWERED or kind is EventKind.APPROVAL_WITHDRAWN:
            asked = asks.pop((node, str(data.get("id"))), None)
            if asked is not None and ev.at > asked[0]:
                row.bars.append(Bar(kind="approval", start=asked[0], end=ev.at,
                                    attempt=asked[1]))
        elif kind is EventKind.NODE_SKIPPED:
            row.status = "skipped"
        elif kind is EventKind.NODE_BLOCKED:
            row.status = "blocked"
    note = ""
    if finished is not None:
        end = finished
    elif live:
        end = now if now is not None else time.time()
        note = "still running: drawn up to now"
    else:
        end = events[-1].at if events else start
        status = "interrupted"
        note = "its process is gone: drawn up to its last event"
    unfinished = "running" if live and finished is None else "interrupted"
    for node, (began, attempt) in open_run.items():
        rows[node].bars.append(Bar(kind="run", start=began, end=max(began, end),
                                   attempt=attempt, outcome=unfinished))
    for node, (what, since) in waiting.items():
        if end > since:
            rows[node].bars.append(Bar(kind=what, start=since, end=end, attempt=0))
    for (node, _), (since, attempt) in asks.items():
        if end > since:
            rows[node].bars.append(Bar(kind="approval", start=since, end=end, attempt=attempt))
    ordered = sorted(rows.values(), key=lambda r: (r.bars[0].start if r.bars else r.first))
    return Timeline(run_id=run_id, graph=graph, status=status, start=start or (
        events[0].at if events else 0.0), end=end, rows=tuple(ordered),
        critical=frozenset(critical), note=note)


def _ticks(span: float) -> float:
    """A round step for the time axis, about ten ticks across ``span`` seconds."""
    step = 0.001
    for candidate in (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10,
                      15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 43200, 86400):
        step = candidate
        if span / candidate <= 10:
            break
    return step


def _when(seconds: float) -> str:
    if seconds >= 60:
        return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
    return f"{seconds:g}s"


def gantt_svg(line: Timeline, *, width: int = 1100) -> str:
    """The timeline as an SVG document."""
    shown = line.rows[:ROWS]
    label_w = min(320.0, max([text_width(str(r.node)) for r in shown] + [60.0]) + 24)
    left, right = 16 + label_w, width - 24
    top = 70 + (18 if line.note else 0)
    span = max(line.end - line.start, 1e-6)
    scale = (right - left) / span
    height = top + AXIS + len(shown) * ROW_H + 60 + (18 if len(line.rows) > ROWS else 0)

    def x(at: float) -> float:
        return left + (at - line.start) * scale

    title = f"run {line.run_id}  graph {line.graph}  {line.status}"
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="{xml_text(FONT)}" font-size="12">',
           f"<title>{xml_text(title)}</title>",
           '<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
           'patternTransform="rotate(45)"><line x1="0" y1="0" x2="0" y2="6" stroke="#74c0fc" '
           'stroke-width="2"/></pattern></defs>',
           f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
           f'<text x="16" y="26" font-size="15" font-weight="bold">{xml_text(title)}</text>',
           f'<text x="16" y="46" fill="#555">{_when(round(span, 3))} from first to last event'
           f"; {len(line.rows)} nodes; critical path outlined in black</text>"]
    if line.note:
        out.append(f'<text class="note" x="16" y="64" fill="#c92a2a">{xml_text(line.note)}'
                   "</text>")
    step = _ticks(span)
    tick = 0.0
    axis_y = top + AXIS - 8
    while tick <= span + 1e-9:
        tx = x(line.start + tick)
        out.append(f'<line x1="{tx:.1f}" y1="{axis_y + 4}" x2="{tx:.1f}" '
                   f'y2="{top + AXIS + len(shown) * ROW_H}" stroke="#eee"/>')
        out.append(f'<text x="{tx:.1f}" y="{axis_y}" text-anchor="middle" fill="#666" '
                   f'font-size="10">{_when(round(tick, 3))}</text>')
        tick += step
    for i, row in enumerate(shown):
        y = top + AXIS + i * ROW_H
        critical = row.node in line.critical
        if i % 2:
            out.append(f'<rect x="0" y="{y}" width="{width}" height="{ROW_H}" fill="#fafafa"/>')
        weight = ' font-weight="bold"' if critical else ""
        out.append(f'<text class="node" x="{left - 8:.1f}" y="{y + 15}" text-anchor="end"'
                   f'{weight}>{xml_text(_clip(str(row.node), label_w))}<title>'
                   f"{xml_text(f'{row.node}: {row.status}')}</title></text>")
        for bar in sorted(row.bars, key=lambda b: b.kind == "approval"):  # over attempts
            out.append(_bar(bar, x(bar.start), max(x(bar.end) - x(bar.start), 1.5), y,
                            row.node, critical, line.start))
        if not row.bars:  # skipped or blocked: it never ran; say so where the log did
            out.append(f'<text class="status" x="{x(row.first) + 4:.1f}" y="{y + 15}" '
                       f'fill="#868e96" font-style="italic">{xml_text(row.status)}</text>')
    if len(line.rows) > ROWS:
        out.append(f'<text x="16" y="{top + AXIS + len(shown) * ROW_H + 14}" fill="#555">'
                   f"... and {len(line.rows) - ROWS} more nodes not drawn</text>")
    out.append(_legend(16, height - 24))
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _clip(text: str, room: float) -> str:
    while text_width(text) > room - 24 and len(text) > 4:
        text = text[:-2] + "…"
    return text


def _bar(bar: Bar, left: float, width: float, y: float, node: NodeId, critical: bool,
         origin: float) -> str:
    top = y + (ROW_H - BAR_H) / 2
    took = f"{bar.end - bar.start:.3f}s from {bar.start - origin:.3f}s"
    if bar.kind != "run":
        fill, what = WAIT[bar.kind]
        return (f'<rect class="bar {bar.kind}" x="{left:.1f}" y="{top + 3:.1f}" '
                f'width="{width:.1f}" height="{BAR_H - 6}" fill="{fill}">'
                f"<title>{xml_text(f'{node}: {what}, {took}')}</title></rect>")
    colour = COLOURS.get(bar.outcome, "#868e96")
    edge = ' stroke="#000" stroke-width="2"' if critical else ""
    tip = f"{node} attempt {bar.attempt}: {bar.outcome}, {took}" + (
        f"; {bar.error}" if bar.error else "")
    parts = [f'<rect class="bar run {bar.outcome}" x="{left:.1f}" y="{top:.1f}" '
             f'width="{width:.1f}" height="{BAR_H}" rx="2" fill="{colour}"{edge}>'
             f"<title>{xml_text(tip[:600])}</title></rect>"]
    if bar.outcome == "failed" and width >= 10:  # a cross: this attempt failed
        cx, cy = left + width - 6, top + BAR_H / 2
        parts.append(f'<path d="M{cx - 3:.1f},{cy - 3:.1f} L{cx + 3:.1f},{cy + 3:.1f} '
                     f'M{cx + 3:.1f},{cy - 3:.1f} L{cx - 3:.1f},{cy + 3:.1f}" stroke="#fff" '
                     'stroke-width="1.6"/>')
    return "".join(parts)


def _legend(left: float, y: float) -> str:
    items = [(COLOURS["succeeded"], "succeeded"), (COLOURS["failed"], "failed attempt"),
             (COLOURS["cancelled"], "cancelled"), (COLOURS["running"], "running"),
             (COLOURS["interrupted"], "interrupted"), (WAIT["queued"][0], "queued"),
             (WAIT["backoff"][0], "retry back-off"), (WAIT["approval"][0], "approval")]
    parts = ['<g class="legend" font-size="11" fill="#333">']
    for colour, text in items:
        parts.append(f'<rect x="{left:.1f}" y="{y:.1f}" width="14" height="10" rx="2" '
                     f'fill="{colour}"/><text x="{left + 18:.1f}" y="{y + 9:.1f}">{text}</text>')
        left += 30 + text_width(text, 11)
    parts.append(f'<rect x="{left:.1f}" y="{y:.1f}" width="14" height="10" fill="#2f9e44" '
                 f'stroke="#000" stroke-width="2"/><text x="{left + 18:.1f}" y="{y + 9:.1f}">'
                 "critical path</text></g>")
    return "".join(parts)


def gantt_html(line: Timeline) -> str:
    """The timeline's SVG in a self-contained HTML page (no script, no external asset)."""
    title = xml_text(f"counterpoint run {line.run_id} ({line.graph})")
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{title}</title><style>body{{margin:16px;font-family:{FONT};}}"
            "svg{max-width:100%;height:auto}</style></head><body>\n"
            + gantt_svg(line) + "</body></html>\n")
