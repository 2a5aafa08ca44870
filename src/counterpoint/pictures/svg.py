"""A self-contained SVG of a :class:`~.model.Picture`, laid out by :mod:`.layout`.

No script, no external font, stylesheet or image: the file can be mailed, embedded in a
report or opened from disk. Text is sized for a monospace font, so boxes fit their
labels without measuring text.
"""

from __future__ import annotations

import re

from .layout import Bend, Layout, layered
from .model import Box, BoxKind, Picture

FONT = "ui-monospace, SFMono-Regular, Menlo, Consolas, 'DejaVu Sans Mono', monospace"
CHAR = 7.3
"""Width of a character at 12px in the font above (wide enough for all of them)."""
MARGIN = 24
TITLE = 30
BOX_H = 40
ROW_GAP = 48
GAP = 28
BEND_W = 12
STACK = 8
"""How far a map's stack of boxes reaches below and right of its front box."""
FILL = {BoxKind.STEP: "#ffffff", BoxKind.MAP: "#eef6ff", BoxKind.GRAPH: "#f3efff",
        BoxKind.BRANCH: "#fff6e5", BoxKind.INPUT: "#f4f4f4"}
STROKE = {BoxKind.STEP: "#444444", BoxKind.MAP: "#3b6fb6", BoxKind.GRAPH: "#6b4fb6",
          BoxKind.BRANCH: "#b7791f", BoxKind.INPUT: "#888888"}
LEGEND = {BoxKind.STEP: "step", BoxKind.MAP: "map (fan-out)", BoxKind.GRAPH: "sub-graph",
          BoxKind.BRANCH: "branch (chooses)", BoxKind.INPUT: "graph input"}

_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def xml_text(text: str) -> str:
    """``text`` for XML content or a quoted attribute (characters XML cannot hold are
    dropped)."""
    text = _NOT_XML.sub("", text)
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;").replace("'", "&#39;"))


def text_width(text: str, size: float = 12) -> float:
    """Width of ``text`` at ``size`` px in :data:`FONT`; wide characters count twice."""
    wide = sum(1 for ch in text if ord(ch) >= 0x1100)
    return (len(text) + wide) * CHAR * size / 12


def _width(box: Box) -> float:
    return max(72.0, text_width(box.label, 13) + 28, text_width(box.detail, 11) + 28)


def to_svg(picture: Picture) -> str:
    """The picture as an SVG document (top to bottom)."""
    keys = [box.key for box in picture.boxes]
    by_key = {box.key: box for box in picture.boxes}
    layout = layered(keys, [(line.source, line.target) for line in picture.lines])
    x, widths, row_width = _places(layout, by_key)
    width = max([row_width, text_width(picture.name, 15) + 2 * MARGIN,
                 _legend_width(picture) + 2 * MARGIN, 240.0])
    legend_y = MARGIN + TITLE + len(layout.rows) * (BOX_H + ROW_GAP)
    height = legend_y + 30

    def top(slot: str | Bend) -> float:
        row = slot.layer if isinstance(slot, Bend) else layout.layer[slot]
        return MARGIN + TITLE + row * (BOX_H + ROW_GAP)

    shift = (width - row_width) / 2
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" '
           f'height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" '
           f'font-family="{xml_text(FONT)}" font-size="12">',
           f"<title>{xml_text(picture.name)}</title>",
           '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
           'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
           'fill="#555"/></marker></defs>',
           f'<rect width="{width:.0f}" height="{height:.0f}" fill="#ffffff"/>',
           f'<text x="{MARGIN}" y="{MARGIN + 8}" font-size="15" font-weight="bold">'
           f"{xml_text(picture.name)}</text>"]
    for line, route in zip(picture.lines, layout.routes, strict=True):
        below = STACK if by_key[line.source].kind is BoxKind.MAP else 0
        points: list[tuple[float, float]] = [(x[route[0]] + shift,
                                              top(route[0]) + BOX_H + below)]
        for bend in route[1:-1]:
            points += [(x[bend] + shift, top(bend)), (x[bend] + shift, top(bend) + BOX_H)]
        points.append((x[route[-1]] + shift, top(route[-1])))
        dash = ' stroke-dasharray="6 4"' if line.ordering else ""
        color = "#b7791f" if line.choice else "#555"
        tip = f"{by_key[line.source].label} -> {by_key[line.target].label}" \
            + (f" ({line.label})" if line.label else "") \
            + (" (after: ordering only)" if line.ordering else "") \
            + (" (if chosen)" if line.choice else "")
        out.append(f'<path class="edge" d="{_path(points)}" fill="none" stroke="{color}" '
                   f'stroke-width="1.4"{dash} marker-end="url(#arrow)">'
                   f"<title>{xml_text(tip)}</title></path>")
    for box in picture.boxes:
        out.append(_box(box, x[box.key] + shift - widths[box.key] / 2, top(box.key),
                        widths[box.key]))
    out.append(_legend(picture, legend_y))
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _places(layout: Layout, boxes: dict[str, Box]
            ) -> tuple[dict[str | Bend, float], dict[str, float], float]:
    """Centre x of every slot (rows centred on the widest), each box's width, the width."""
    widths = {key: _width(box) for key, box in boxes.items()}

    def slot_width(slot: str | Bend) -> float:
        return BEND_W if isinstance(slot, Bend) else widths[slot]

    spans = [sum(slot_width(s) for s in row) + GAP * max(0, len(row) - 1)
             for row in layout.rows]
    widest = max(spans, default=0.0)
    x: dict[str | Bend, float] = {}
    for row, span in zip(layout.rows, spans, strict=True):
        left = MARGIN + (widest - span) / 2
        for slot in row:
            w = slot_width(slot)
            x[slot] = left + w / 2
            left += w + GAP
    return x, widths, widest + 2 * MARGIN


def _path(points: list[tuple[float, float]]) -> str:
    """Curves between rows, straight through the rows a long edge crosses."""
    (x0, y0), parts = points[0], [f"M{points[0][0]:.1f},{points[0][1]:.1f}"]
    for i, (x1, y1) in enumerate(points[1:]):
        if i % 2 == 0:
            mid = (y0 + y1) / 2
            parts.append(f"C{x0:.1f},{mid:.1f} {x1:.1f},{mid:.1f} {x1:.1f},{y1:.1f}")
        else:
            parts.append(f"L{x1:.1f},{y1:.1f}")
        x0, y0 = x1, y1
    return " ".join(parts)


def _box(box: Box, left: float, top: float, width: float) -> str:
    fill, stroke = FILL[box.kind], STROKE[box.kind]
    pen = 3 if box.output else 1.4
    right, bottom = left + width, top + BOX_H
    shapes: list[str] = []
    if box.kind is BoxKind.MAP:  # a stack: one task per item
        for d in (STACK, STACK // 2):
            shapes.append(f'<rect x="{left + d:.1f}" y="{top + d:.1f}" width="{width:.1f}" '
                          f'height="{BOX_H}" rx="5" fill="{fill}" stroke="{stroke}"/>')
    if box.kind is BoxKind.BRANCH:
        points = (f"{left + 10:.1f},{top:.1f} {right - 10:.1f},{top:.1f} {right:.1f},"
                  f"{top + BOX_H / 2:.1f} {right - 10:.1f},{bottom:.1f} {left + 10:.1f},"
                  f"{bottom:.1f} {left:.1f},{top + BOX_H / 2:.1f}")
        shapes.append(f'<polygon points="{points}" fill="{fill}" stroke="{stroke}" '
                      f'stroke-width="{pen}"/>')
    else:
        rx = BOX_H / 2 if box.kind is BoxKind.INPUT else 5
        shapes.append(f'<rect x="{left:.1f}" y="{top:.1f}" width="{width:.1f}" '
                      f'height="{BOX_H}" rx="{rx:g}" fill="{fill}" stroke="{stroke}" '
                      f'stroke-width="{pen}"/>')
    if box.kind is BoxKind.GRAPH:  # a double border: a graph inside
        shapes.append(f'<rect x="{left + 3:.1f}" y="{top + 3:.1f}" width="{width - 6:.1f}" '
                      f'height="{BOX_H - 6}" rx="3" fill="none" stroke="{stroke}"/>')
    centre = left + width / 2
    label_y = top + (16 if box.detail else 25)
    texts = [f'<text class="label" x="{centre:.1f}" y="{label_y:.1f}" text-anchor="middle" '
             f'font-size="13" font-weight="bold">{xml_text(box.label)}</text>']
    if box.detail:
        texts.append(f'<text class="detail" x="{centre:.1f}" y="{top + 31:.1f}" '
                     f'text-anchor="middle" font-size="11" fill="#555">'
                     f"{xml_text(box.detail)}</text>")
    tip = f"{box.label}: {box.detail}" if box.detail else box.label
    if box.output:
        tip += " (the graph's output)"
    return (f'<g class="node {box.kind.value}"><title>{xml_text(tip)}</title>'
            + "".join(shapes) + "".join(texts) + "</g>")


def _legend_width(picture: Picture) -> float:
    kinds = [k for k in BoxKind if any(b.kind is k for b in picture.boxes)]
    width = sum(30 + text_width(LEGEND[k], 11) for k in kinds)
    if any(line.ordering for line in picture.lines):
        width += 26 + text_width("after (ordering only)", 11)
    return width


def _legend(picture: Picture, y: float) -> str:
    kinds = [k for k in BoxKind if any(b.kind is k for b in picture.boxes)]
    items = [(LEGEND[k], FILL[k], STROKE[k]) for k in kinds]
    left = float(MARGIN)
    parts = ['<g class="legend" font-size="11" fill="#333">']
    for text, fill, stroke in items:
        parts.append(f'<rect x="{left:.1f}" y="{y:.1f}" width="14" height="10" rx="2" '
                     f'fill="{fill}" stroke="{stroke}"/>')
        parts.append(f'<text x="{left + 18:.1f}" y="{y + 9:.1f}">{xml_text(text)}</text>')
        left += 30 + text_width(text, 11)
    if any(line.ordering for line in picture.lines):
        parts.append(f'<line x1="{left:.1f}" y1="{y + 5:.1f}" x2="{left + 22:.1f}" '
                     f'y2="{y + 5:.1f}" stroke="#555" stroke-dasharray="6 4"/>')
        parts.append(f'<text x="{left + 26:.1f}" y="{y + 9:.1f}">after (ordering only)</text>')
    parts.append("</g>")
    return "".join(parts)
