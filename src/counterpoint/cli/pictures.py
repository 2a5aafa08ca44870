"""``counterpoint graph`` (a graph's picture) and ``counterpoint trace`` (a run's Gantt).

Both write text or a file and import nothing heavy until they run: ``counterpoint
--help`` builds them from their signatures (see tests/cli/test_startup.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from .args import Db
from .console import fail, make_console, reported

if TYPE_CHECKING:
    from ..graph import Graph

FORMATS = {".mmd": "mermaid", ".mermaid": "mermaid", ".md": "mermaid", ".dot": "dot",
           ".gv": "dot", ".svg": "svg"}
"""``--out`` suffixes ``graph`` knows, and the format each means."""
TRACE_FORMATS = (".html", ".htm", ".svg")

GRAPH_HELP = ("Draw a graph without running it: Mermaid (default), Graphviz DOT or a "
              "self-contained SVG.")
TRACE_HELP = ("Write a static Gantt chart of a run's node attempts (queued, running, failed; "
              "critical path outlined) to FILE.html or FILE.svg.")


def graph_command(
    target: Annotated[str, typer.Argument(
        metavar="TARGET", help="FILE.py[:GRAPH], package.module[:GRAPH] or a workflow "
                               "FILE.yaml.")],
    fmt: Annotated[str | None, typer.Option(
        "--format", "-f", metavar="FORMAT",
        help="mermaid, dot or svg (default: from --out's suffix, else mermaid).")] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", metavar="FILE", help="Write to FILE (.mmd, .md, .dot, .gv, .svg) "
                                            "instead of printing.")] = None,
) -> None:
    """Draw a graph (nothing runs; its module is imported to build it)."""
    kind = _format(fmt, out)
    with reported():
        graph = _load(target)
        from .. import pictures
        picture = pictures.describe(graph)
        text = {"mermaid": pictures.to_mermaid, "dot": pictures.to_dot,
                "svg": pictures.to_svg}[kind](picture)
    if kind == "mermaid" and out is not None and out.suffix == ".md":
        text = f"```mermaid\n{text}```\n"  # a Markdown file shows it as a diagram
    _write(text, out)


def _format(fmt: str | None, out: Path | None) -> str:
    if fmt is not None:
        kind = fmt.strip().lower()
        if kind not in ("mermaid", "dot", "svg"):
            fail(f"--format {fmt!r}: use mermaid, dot or svg")
        return kind
    if out is None:
        return "mermaid"
    known = FORMATS.get(out.suffix.lower())
    if known is None:
        fail(f"--out {out}: unknown suffix {out.suffix or '(none)'!r}; use "
             f"{', '.join(FORMATS)} or give --format")
    return known


def _load(target: str) -> Graph:
    from ..loader import load_target
    from .goals import target_kind
    from .stores import importable_cwd
    kind = target_kind(target)
    if kind == "workflow":
        from ..workflow import load_workflow
        return load_workflow(target).graph
    if kind == "goal":
        fail(f"{target!r} is not a graph file or module; give FILE.py[:GRAPH], "
             "package.module[:GRAPH] or FILE.yaml")
    importable_cwd()
    return load_target(target)


def _write(text: str, out: Path | None) -> None:
    if out is None:
        typer.echo(text, nl=False)
        return
    try:
        out.write_text(text, encoding="utf-8")
    except IsADirectoryError:
        fail(f"cannot write {out}: it is a folder; give a file in it, e.g. "
             f"{out / ('picture' + out.suffix if out.suffix else 'picture.svg')}")
    except FileNotFoundError as exc:
        if not out.parent.is_dir():  # a misspelt folder is not made: see `run --db`
            fail(f"cannot write {out}: its folder {out.parent} does not exist; create it "
                 f"first (mkdir -p {out.parent}), or correct the path")
        fail(f"cannot write {out}: {exc.strerror or exc}")
    except OSError as exc:
        fail(f"cannot write {out}: {exc.strerror or exc}")
    make_console(stderr=True).print(f"wrote {out}", soft_wrap=True)


def trace_command(
    run_id: Annotated[str, typer.Argument(
        metavar="RUN_ID", help="The run: its id, a unique start of it, or last.")],
    out: Annotated[Path, typer.Option(
        "--out", "-o", metavar="FILE", help="FILE.html or FILE.svg to write.")],
    db: Db = None,
) -> None:
    """Write a static Gantt chart of a run from its log (the graph's code is not imported).

    A run that has not finished is drawn up to now (its process still runs it) or up to
    its last event (its process died), and the chart says so.
    """
    suffix = out.suffix.lower()
    if suffix not in TRACE_FORMATS:
        fail(f"--out {out}: unknown suffix {out.suffix or '(none)'!r}; use .html or .svg")
    from ..pictures.gantt import gantt_html, gantt_svg, timeline
    from ..state import RunStatus
    from ..store.owners import run_owner_alive
    from .recorded import log_report, resolve_run
    from .stores import open_existing
    with reported():
        store = open_existing(db, run_id)
        try:
            run = resolve_run(store, run_id)
            record = store.run(run)
            events = store.events(run)
        finally:
            store.close()
    report = log_report(record, events)
    live = record.status == RunStatus.RUNNING and run_owner_alive(record)
    line = timeline(run, events, critical=report.metrics.critical_path_nodes
                    if report.deps_known else (), live=live)
    _write(gantt_svg(line) if suffix == ".svg" else gantt_html(line), out)
    if line.note:
        make_console(stderr=True).print(f"note: run {run} {line.note}", soft_wrap=True)
