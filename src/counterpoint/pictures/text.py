"""Mermaid and Graphviz DOT text for a :class:`~.model.Picture`.

Node ids never reach either format as identifiers: each box is ``n0``, ``n1``, ... and
its id is only ever a label, escaped for the format, so a node called ``a"] --> b`` is
drawn as that text rather than changing the picture.
"""

from __future__ import annotations

import json

from .model import Box, BoxKind, Line, Picture

_MERMAID_SHAPES = {  # (open, close) of each kind's node shape
    BoxKind.STEP: ("[", "]"), BoxKind.MAP: ("{{", "}}"), BoxKind.GRAPH: ("[[", "]]"),
    BoxKind.BRANCH: ("{", "}"), BoxKind.INPUT: ("([", "])"),
}
_MERMAID_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                          " _.,:/()+=*'!?@$%^~-")


def mermaid_text(text: str) -> str:
    """``text`` for inside a quoted Mermaid label: characters Mermaid reads (quotes,
    brackets, ``<``, ``#``, ``|``, ...) become ``#code;`` entities; letters of any
    script are kept as they are."""
    out: list[str] = []
    for ch in text:
        if ch in _MERMAID_SAFE or (ch.isalnum() and ord(ch) > 127):
            out.append(ch)
        elif ch in "\r\n\t":
            out.append(" ")
        else:
            out.append(f"#{ord(ch)};")
    return "".join(out)


def to_mermaid(picture: Picture) -> str:
    """A Mermaid ``flowchart`` of the picture (top to bottom)."""
    keys = {box.key: f"n{i}" for i, box in enumerate(picture.boxes)}
    # the title is YAML front matter, where a JSON string is a valid quoted scalar
    lines = ["---", f"title: {json.dumps(picture.name, ensure_ascii=False)}", "---",
             "flowchart TD"]
    for box in picture.boxes:
        opening, closing = _MERMAID_SHAPES[box.kind]
        label = mermaid_text(box.label)
        if box.detail:
            label += f"<br/><small>{mermaid_text(box.detail)}</small>"
        lines.append(f"    {keys[box.key]}{opening}\"{label}\"{closing}")
    for line in picture.lines:
        arrow = "-.->" if line.ordering else "-->"
        label = _edge_label(line)
        text = f"|\"{mermaid_text(label)}\"|" if label else ""
        lines.append(f"    {keys[line.source]} {arrow}{text} {keys[line.target]}")
    # class names end in "Node": "graph" alone is a keyword of Mermaid's flowchart grammar
    styles = {BoxKind.MAP: "fill:#eef6ff,stroke:#3b6fb6,stroke-width:2px",
              BoxKind.GRAPH: "fill:#f3efff,stroke:#6b4fb6,stroke-width:2px",
              BoxKind.BRANCH: "fill:#fff6e5,stroke:#b7791f",
              BoxKind.INPUT: "fill:#f4f4f4,stroke:#888"}
    for kind, style in styles.items():
        members = [keys[b.key] for b in picture.boxes if b.kind is kind]
        if members:
            lines.append(f"    classDef {kind.value}Node {style}")
            lines.append(f"    class {','.join(members)} {kind.value}Node")
    outputs = [keys[b.key] for b in picture.boxes if b.output]
    if outputs:
        lines.append("    classDef outputNode stroke-width:3px")
        lines.append(f"    class {','.join(outputs)} outputNode")
    return "\n".join(lines) + "\n"


def _edge_label(line: Line) -> str:
    parts = [line.label] if line.label else []
    if line.ordering:
        parts.append("after")
    if line.choice:
        parts.append("if chosen")
    return ", ".join(parts)


def dot_text(text: str) -> str:
    """``text`` as a DOT quoted string, quotes included (``\\`` is doubled, so that
    label escapes such as ``\\N`` or ``\\l`` are not read)."""
    escaped = (text.replace("\\", "\\\\").replace('"', '\\"')
               .replace("\r", "").replace("\n", "\\n"))
    return f'"{escaped}"'


_DOT_SHAPES = {
    BoxKind.STEP: 'shape=box, style="rounded"',
    BoxKind.MAP: 'shape=box3d, style="filled", fillcolor="#eef6ff"',
    BoxKind.GRAPH: 'shape=box, peripheries=2, style="filled", fillcolor="#f3efff"',
    BoxKind.BRANCH: 'shape=diamond, style="filled", fillcolor="#fff6e5"',
    BoxKind.INPUT: 'shape=ellipse, style="filled", fillcolor="#f4f4f4"',
}


def to_dot(picture: Picture) -> str:
    """A Graphviz ``digraph`` of the picture (top to bottom)."""
    keys = {box.key: f"n{i}" for i, box in enumerate(picture.boxes)}
    out = [f"digraph {dot_text(picture.name)} {{",
           f"  label={dot_text(picture.name)}; labelloc=t; rankdir=TB;",
           '  node [fontname="Helvetica"]; edge [fontname="Helvetica", fontsize=10];']
    for box in picture.boxes:
        out.append(f"  {keys[box.key]} [label={dot_text(_two_lines(box))}, "
                   f"{_DOT_SHAPES[box.kind]}{', penwidth=3' if box.output else ''}];")
    for line in picture.lines:
        attrs = []
        label = _edge_label(line)
        if label:
            attrs.append(f"label={dot_text(label)}")
        if line.ordering:
            attrs.append("style=dashed")
        if line.choice:
            attrs.append('color="#b7791f"')
        extra = f" [{', '.join(attrs)}]" if attrs else ""
        out.append(f"  {keys[line.source]} -> {keys[line.target]}{extra};")
    out.append("}")
    return "\n".join(out) + "\n"


def _two_lines(box: Box) -> str:
    return f"{box.label}\n{box.detail}" if box.detail else box.label
