"""Graph pictures (counterpoint.pictures): what a graph's picture shows, that every
format keeps names as text however nasty they are, and the layered layout's invariants
over random DAGs."""

from __future__ import annotations

import html
import itertools
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import counterpoint as cp
from counterpoint.pictures import BoxKind, describe, layered, to_dot, to_mermaid, to_svg
from counterpoint.pictures.layout import Bend

SVG = "{http://www.w3.org/2000/svg}"
NASTY = ['say "hi"', "a --> b", "x) --> (y", "{curly}", "pipe|bar", "#hash;", "<b>bold<b>",
         "Kraków ☃ 東京", "back\\slash \\N \\l", "amp & co", "it's", "semi;colon", "`tick`",
         "end", "%% not a comment", "click me", "line\u2028separator"]


def _one(x: int = 0) -> int:
    return x + 1


def _pick(x: int) -> cp.Choose:
    return cp.Choose("yes")


def _items() -> list[int]:
    return [1, 2]


def _count(xs: list[int]) -> int:
    return len(xs)


def nasty_graph() -> cp.Graph:
    g = cp.Graph('trip "nasty" --> <graph>')
    first = g.add(NASTY[0], _one)
    previous = first
    for name in NASTY[1:]:
        previous = g.add(name, _one, x=previous)
    g.add("ordered", _one, after=[first])
    return g


def kinds_graph() -> cp.Graph:
    sub = cp.Graph("inner")
    value = sub.input("value", int)
    sub.add("double", _one, x=value)
    g = cp.Graph("kinds")
    city = g.input("city", str)
    items = g.add("items", _items)
    g.map("each", _one, over=items)
    g.add("nested", sub, value=1)
    decide = g.add("decide", _pick, x=g.add("fetch", lambda city: 1, city=city))
    g.add("yes", _one, after=[decide])
    out = g.add("report", _count, xs=items, after=["nested"])
    g.output(out)
    return g


# ------------------------------------------------------------------ what is shown
def test_the_picture_shows_node_kinds_inputs_and_both_kinds_of_edge() -> None:
    picture = describe(kinds_graph())
    kinds = {box.label: box.kind for box in picture.boxes}
    assert kinds == {"city": BoxKind.INPUT, "items": BoxKind.STEP, "each": BoxKind.MAP,
                     "nested": BoxKind.GRAPH, "fetch": BoxKind.STEP, "decide": BoxKind.BRANCH,
                     "yes": BoxKind.STEP, "report": BoxKind.STEP}
    details = {box.label: box.detail for box in picture.boxes}
    assert details["each"] == "map _one over items"
    assert details["nested"] == "graph inner (1 node)"
    assert [b.label for b in picture.boxes if b.output] == ["report"]
    lines = {(line.source, line.target): line for line in picture.lines}
    assert lines[("items", "each")].label == "over"
    assert lines[("[input]city", "fetch")].label == "city"
    assert lines[("items", "report")].label == "xs"
    assert lines[("nested", "report")].ordering and not lines[("items", "report")].ordering
    assert lines[("decide", "yes")].choice and lines[("decide", "yes")].ordering
    assert not lines[("fetch", "decide")].choice


def test_a_workflows_when_guards_and_first_of_are_drawn_as_branches() -> None:
    from counterpoint.workflow import load_workflow
    grade = Path(__file__).resolve().parents[1] / "examples" / "workflows" / "grade.yaml"
    picture = describe(load_workflow(grade).graph)
    branches = sorted(box.label for box in picture.boxes if box.kind is BoxKind.BRANCH)
    assert branches == ["comment.pick", "failed.when", "passed.when"], branches
    chosen = {line.target for line in picture.lines if line.choice}
    assert {"passed", "failed", "comment"} <= chosen


# ------------------------------------------------------------------ escaping
_ENTITY = re.compile(r"#(\d+);")


def _unmermaid(text: str) -> str:
    return _ENTITY.sub(lambda m: chr(int(m.group(1))), text)


def test_mermaid_keeps_every_name_inside_its_quoted_label() -> None:
    text = nasty_graph().to_mermaid()
    node = re.compile(r'^    (n\d+)(\[|\[\[|\{\{|\{|\(\[)"([^"]*)"(\]|\]\]|\}\}|\}|\]\))$')
    edge = re.compile(r'^    (n\d+) (-->|-\.->)(?:\|"([^"]*)"\|)? (n\d+)$')
    labels: dict[str, str] = {}
    edges: list[tuple[str, str, str]] = []
    body = text.split("flowchart TD\n", 1)[1].splitlines()
    for line in body:
        if line.startswith("    class"):
            continue
        if m := node.match(line):
            labels[m.group(1)] = _unmermaid(m.group(3).split("<br/>")[0])
        elif m := edge.match(line):
            edges.append((m.group(1), m.group(2), m.group(4)))
        else:
            raise AssertionError(f"line Mermaid would read differently: {line!r}")
    assert sorted(labels.values()) == sorted([*NASTY, "ordered"])
    named = labels
    chain = [(named[a], named[b]) for a, arrow, b in edges if arrow == "-->"]
    assert chain == list(itertools.pairwise(NASTY))
    assert [(named[a], named[b]) for a, arrow, b in edges if arrow == "-.->"] == \
        [(NASTY[0], "ordered")]
    title = text.splitlines()[1]
    assert title == 'title: "trip \\"nasty\\" --> <graph>"'


def _dot_strings(text: str) -> list[str]:
    """The quoted strings of a DOT text, unescaped as Graphviz reads them."""
    out, i = [], 0
    while (start := text.find('"', i)) >= 0:
        j, chars = start + 1, []
        while text[j] != '"':
            if text[j] == "\\" and text[j + 1] in '"\\':
                chars.append(text[j + 1])
                j += 2
            else:
                chars.append(text[j])
                j += 1
        out.append("".join(chars))
        i = j + 1
    return out


def test_dot_quotes_every_name_and_doubles_backslashes() -> None:
    text = nasty_graph().to_dot()
    strings = [s.split("\\n")[0] for s in _dot_strings(text)]  # label, then the step
    for name in NASTY:
        assert name in strings, name
    assert "back\\\\slash \\\\N \\\\l" in text  # \N and \l stay text, not label escapes
    outside = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    assert "-->" not in outside and "<b>" not in outside and "☃" not in outside


def test_graphviz_reads_the_dot_and_draws_every_name(tmp_path: Path) -> None:
    if shutil.which("dot") is None:  # fails, never skips: .ci/run installs Graphviz
        pytest.fail("this test needs Graphviz's dot on PATH: run `apt-get install graphviz`",
                    pytrace=False)
    done = subprocess.run(["dot", "-Tsvg"], input=nasty_graph().to_dot(), text=True,
                          capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    texts = {"".join(t.itertext()) for t in ET.fromstring(done.stdout).iter(f"{SVG}text")}
    for name in NASTY:
        assert name.replace("\\\\", "\\") in texts, name


def test_the_svg_is_well_formed_and_holds_every_name_as_text() -> None:
    root = ET.fromstring(nasty_graph().to_svg())
    labels = [t.text for t in root.iter(f"{SVG}text") if t.get("class") == "label"]
    assert sorted(labels) == sorted([*NASTY, "ordered"])
    assert root.find(f"{SVG}title").text == 'trip "nasty" --> <graph>'  # type: ignore[union-attr]
    edges = [p for p in root.iter(f"{SVG}path") if p.get("class") == "edge"]
    assert len(edges) == len(NASTY)
    assert [p.get("stroke-dasharray") for p in edges].count("6 4") == 1
    assert not any(e.tag.endswith(("script", "image", "foreignObject")) for e in root.iter())
    assert not any("href" in k for e in root.iter() for k in e.attrib if "marker" not in k)


def test_every_kind_has_its_own_shape_in_each_format() -> None:
    g = kinds_graph()
    mermaid = g.to_mermaid()
    assert re.search(r'\{\{"each', mermaid) and re.search(r'\{"decide', mermaid)
    assert re.search(r'\[\["nested', mermaid) and re.search(r'\(\["city<br/>', mermaid)
    dot = g.to_dot()
    assert "shape=box3d" in dot and "shape=diamond" in dot and "peripheries=2" in dot
    classes = {e.get("class") for e in ET.fromstring(to_svg(describe(g))).iter(f"{SVG}g")}
    assert {"node map", "node graph", "node branch", "node input", "node step"} <= classes
    assert to_mermaid(describe(g)) == mermaid and to_dot(describe(g)) == dot


names = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="[]/"),
               min_size=1, max_size=12)


@settings(max_examples=100, deadline=None)
@given(st.lists(names, min_size=1, max_size=4, unique=True))
def test_any_name_comes_back_as_written_from_every_format(ids: list[str]) -> None:
    g = cp.Graph("any")
    previous = None
    for node in ids:
        previous = g.add(node, _one, **({"x": previous} if previous is not None else {}))
    mermaid = g.to_mermaid().split("flowchart TD\n", 1)[1]
    quoted = re.findall(r'^    n\d+[\[{(]+"([^"]*)"[\]})]+$', mermaid, flags=re.M)
    assert [_unmermaid(q.split("<br/>")[0]) for q in quoted] == \
        [re.sub(r"[\r\n\t]", " ", node) for node in ids]
    node_lines = [line for line in g.to_dot().split("\n")  # not splitlines: \f is text
                  if re.match(r"  n\d+ \[label=", line)]
    labels = [_dot_strings(line)[0] for line in node_lines]
    # a name's own line ends are written \n (a DOT label's line end): compare through them
    assert [label.replace("\\n", "\n") for label in labels] == \
        [node.replace("\r", "") + ("\n_one" if node != "_one" else "") for node in ids]
    root = ET.fromstring(g.to_svg())
    shown = [t.text or "" for t in root.iter(f"{SVG}text") if t.get("class") == "label"]
    xml_ok = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
    # XML cannot hold control characters (they are dropped) and reads \r as a line end
    assert shown == [xml_ok.sub("", node).replace("\r\n", "\n").replace("\r", "\n")
                     for node in ids]


# ------------------------------------------------------------------ layout
@st.composite
def dags(draw: st.DrawFn) -> tuple[list[str], list[tuple[str, str]]]:
    count = draw(st.integers(min_value=1, max_value=18))
    nodes = [f"n{i}" for i in range(count)]
    order = draw(st.permutations(nodes))  # declared in any order, acyclic by rank
    rank = {n: i for i, n in enumerate(order)}
    pairs = [(a, b) for a in nodes for b in nodes if rank[a] < rank[b]]
    edges = draw(st.lists(st.sampled_from(pairs), max_size=30)) if pairs else []
    return nodes, edges


@settings(max_examples=150, deadline=None)
@given(dags())
def test_layout_every_edge_points_down_through_every_row_it_crosses(
        dag: tuple[list[str], list[tuple[str, str]]]) -> None:
    nodes, edges = dag
    layout = layered(nodes, edges)
    assert sorted(s for row in layout.rows for s in row if isinstance(s, str)) == sorted(nodes)
    for (source, target), route in zip(edges, layout.routes, strict=True):
        assert layout.layer[source] < layout.layer[target]
        assert route[0] == source and route[-1] == target
        rows = [s.layer if isinstance(s, Bend) else layout.layer[s] for s in route]
        assert rows == list(range(layout.layer[source], layout.layer[target] + 1))
    for node in nodes:  # longest path: a node sits right below its lowest source
        sources = [layout.layer[a] for a, b in edges if b == node]
        assert layout.layer[node] == (max(sources) + 1 if sources else 0)


@settings(max_examples=150, deadline=None)
@given(dags())
def test_crossing_reduction_never_adds_crossings(
        dag: tuple[list[str], list[tuple[str, str]]]) -> None:
    nodes, edges = dag
    assert layered(nodes, edges).crossings() <= layered(nodes, edges, sweeps=0).crossings()


def test_crossing_reduction_untangles_a_crossed_pair() -> None:
    nodes = ["a", "b", "x", "y"]
    edges = [("a", "y"), ("b", "x")]
    assert layered(nodes, edges, sweeps=0).crossings() == 1
    assert layered(nodes, edges).crossings() == 0


def test_layout_rejects_a_cycle_and_an_unknown_node() -> None:
    with pytest.raises(ValueError, match="cycle"):
        layered(["a", "b"], [("a", "b"), ("b", "a")])
    with pytest.raises(ValueError, match="unknown node 'z'"):
        layered(["a"], [("a", "z")])


# ------------------------------------------------------------------ a real Mermaid
MERMAID_JS = os.environ.get("COUNTERPOINT_MERMAID_JS", "")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(not (MERMAID_JS and Path(MERMAID_JS).is_file() and CHROMIUM),
                    reason="set COUNTERPOINT_MERMAID_JS to mermaid.min.js (npm install "
                           "mermaid) to draw the pictures with Mermaid in headless Chromium")
def test_mermaid_itself_draws_every_name_as_written(tmp_path: Path) -> None:
    graphs = [nasty_graph(), kinds_graph()]
    blocks = "".join(f'<pre class="mermaid">{html.escape(g.to_mermaid())}</pre>'
                     for g in graphs)
    page = tmp_path / "page.html"
    page.write_text(
        f'<!doctype html><html><head><meta charset="utf-8"></head><body>{blocks}'
        f'<script src="{Path(MERMAID_JS).as_uri()}"></script><script>'
        "mermaid.initialize({startOnLoad: false}); mermaid.run().then(() => "
        "document.body.setAttribute('data-done', 'yes')).catch(e => document.body"
        ".setAttribute('data-error', String((e && (e.message || e.str)) || e)));"
        "</script></body></html>")
    assert CHROMIUM is not None
    done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                           "--virtual-time-budget=15000", "--dump-dom", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    dom = done.stdout
    assert 'data-done="yes"' in dom, re.findall(r'data-error="[^"]*"', dom) or done.stderr[-2000:]
    spans = re.findall(r'<span class="nodeLabel"[^>]*>(.*?)</span>', dom, flags=re.S)
    names = [html.unescape(re.split(r"<br\s*/?>", span)[0]) for span in spans]
    kinds = [box.label for box in describe(graphs[1]).boxes]
    assert names == [*NASTY, "ordered", *kinds]
