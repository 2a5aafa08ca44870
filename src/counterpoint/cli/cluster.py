"""``counterpoint run`` beyond one process: the ``--backend``, ``--ray-address``,
``--workers`` and ``--inputs`` options, the backend they choose, and many runs of one
graph placed on Ray shard actors (:func:`counterpoint.ray.run_many`) with their aggregate
progress on the terminal.

Ray is imported only when one of these options asks for it; without Ray installed they
fail with exit code 2 and the ``pip install`` line.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import UserError

if TYPE_CHECKING:
    from rich.console import Console

    from ..graph import Graph
    from ..options import RunOptions
    from ..ray import Progress, RayBackend, RunSummary

BACKENDS = ("inprocess", "ray")

BackendName = Annotated[str | None, typer.Option(
    "--backend", metavar="NAME",
    help="Where nodes run: inprocess (the default: this process) or ray (Ray workers; "
         "needs counterpoint[ray]).")]
RayAddress = Annotated[str | None, typer.Option(
    "--ray-address", metavar="ADDR",
    help="The Ray cluster for --backend ray or --workers: auto (the one `ray start` runs "
         "here), HOST:PORT or ray://HOST:PORT; default: start a local cluster.")]
Workers = Annotated[int | None, typer.Option(
    "--workers", metavar="N", min=1,
    help="Run the graph once per line of --inputs, over N Ray shard actors (each runs "
         "whole runs with its own scheduler and log file).")]
InputsFile = Annotated[str | None, typer.Option(
    "--inputs", metavar="FILE.jsonl",
    help="With --workers: one JSON object of graph inputs per line, one run per line.")]

PROGRESS_EVERY = 1.0
"""Seconds between progress lines when the output is not a terminal."""


def check_backend_options(name: str | None, address: str | None) -> None:
    """Refuse a ``--backend`` / ``--ray-address`` pair that means nothing, without
    connecting anywhere (``resume`` checks them even when nothing is left to run)."""
    if name not in (None, *BACKENDS):
        raise UserError(f"--backend {name!r} is not one of {', '.join(BACKENDS)}")
    if name != "ray" and address is not None:
        raise UserError("--ray-address needs --backend ray or --workers N")


def choose_backend(name: str | None, address: str | None) -> RayBackend | None:
    """The backend ``--backend NAME`` asks for, connected already (so a bad address or a
    missing Ray fails before the run starts); ``None`` for the default in-process one."""
    check_backend_options(name, address)
    if name != "ray":
        return None
    from ..ray.cluster import ray_module
    ray_module()  # the install hint, before the backend module imports Ray
    from ..ray import RayBackend
    backend = RayBackend(address)
    backend.start()
    return backend


def read_inputs(path: str, shared: dict[str, Any], graph: Graph,
                options: RunOptions) -> tuple[list[dict[str, Any]], list[int]]:
    """The runs' inputs: one JSON object per non-blank line of ``path``, over ``shared``
    (the ``--input`` values every run gets), each checked against ``graph`` here (a line
    that does not fit fails as ``path:line``, before any shard starts); and the line of
    each run."""
    from ..scheduler.execution import check_inputs
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise UserError(f"--inputs {path}: cannot read it ({exc.strerror or exc})") from None
    runs: list[dict[str, Any]] = []
    numbers: list[int] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}:{number}: not JSON ({exc.msg}); each line holds one "
                            'object of graph inputs, e.g. {"x": 1}') from None
        if not isinstance(value, dict):
            raise UserError(f"{path}:{number}: a JSON {type(value).__name__}, not an object "
                            'of graph inputs such as {"x": 1}')
        run = {**shared, **value}
        try:
            check_inputs(graph, run, options)
        except UserError as exc:
            raise UserError(f"{path}:{number}: {exc}") from None
        runs.append(run)
        numbers.append(number)
    if not runs:
        raise UserError(f"--inputs {path}: no runs in it (one JSON object per line)")
    return runs, numbers


def shipped_target(target: str) -> str:
    """``target`` as the shards load it: a file made absolute (their working directory is
    Ray's, not ours); a module name as it is (they get this process's import path)."""
    file, sep, attr = target.partition(":")
    return str(Path(file).resolve()) + sep + attr if Path(file).is_file() else target


def run_many_command(target: str, inputs: list[dict[str, Any]], lines: list[int], *,
                     workers: int, address: str | None, options: RunOptions, db: str | None,
                     quiet: bool, as_json: bool, out: Console, progress_out: Console) -> int:
    """Run ``target`` once per item of ``inputs`` (read from ``lines`` of the inputs file)
    over ``workers`` shards; print the progress and a summary. Returns 0 if every run
    succeeded, else 1."""
    from ..ray.cluster import ray_module
    ray_module()
    from ..ray import run_many
    from ..store import default_location
    location = db or default_location()
    if location == "memory" or "://" in location:
        from ..store.postgres_url import redact
        raise UserError(f"--workers needs --db to be a SQLite file (each shard writes "
                        f"<folder of the file>/shards/shard-N.db), not {redact(location)!r}")
    folder = Path(location).parent / "shards"
    view = _ProgressView(progress_out, quiet=quiet)
    began = time.perf_counter()
    try:
        summaries = run_many(shipped_target(target), inputs, workers=workers,
                             store_dir=folder, options=options, address=address,
                             progress=view.show)
    finally:
        view.close()
    total = time.perf_counter() - began
    seconds = view.latest.elapsed if view.latest is not None else total
    failed = [s for s in summaries if s.status != "succeeded"]
    if as_json:
        print(json.dumps(_as_json(summaries, seconds, folder), default=str))
    else:
        _summary(out, summaries, failed, seconds, total, folder, lines)
    return 1 if failed else 0


class _ProgressView:
    """Aggregate progress: one line kept up to date on a terminal, else a line a second."""

    def __init__(self, console: Console, *, quiet: bool) -> None:
        self.console = console
        self.quiet = quiet
        self.live: Any = None
        self.last = float("-inf")
        self.latest: Progress | None = None

    def show(self, progress: Progress) -> None:
        self.latest = progress
        if self.quiet:
            return
        from rich.text import Text
        line = Text(progress_line(progress))
        if self.console.is_terminal:
            if self.live is None:
                from rich.live import Live
                self.live = Live(line, console=self.console, transient=True)
                self.live.start()
            self.live.update(line)
        elif progress.done == progress.total or \
                time.perf_counter() - self.last >= PROGRESS_EVERY:
            self.last = time.perf_counter()
            self.console.print(line, soft_wrap=True)

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()


def progress_line(p: Progress) -> str:
    """``runs 600/1000 done · 2 failed · 400 running · 350 runs/s``."""
    rate = p.done / p.elapsed if p.elapsed > 0 else 0.0
    return (f"runs {p.done}/{p.total} done · {p.failed} failed · {p.running} running · "
            f"{rate:,.0f} runs/s")


def _summary(out: Console, summaries: list[RunSummary], failed: list[RunSummary],
             seconds: float, total: float, folder: Path, lines: list[int]) -> None:
    from rich.text import Text
    rate = len(summaries) / seconds if seconds > 0 else 0.0
    style = "red" if failed else "green"
    out.print(Text(f"{len(summaries)} runs: {len(summaries) - len(failed)} succeeded, "
                   f"{len(failed)} failed in {seconds:.2f}s ({rate:,.0f} runs/s; "
                   f"{total:.1f}s with starting the shards)", style=style), soft_wrap=True)
    for summary in failed[:10]:
        out.print(f"  line {lines[summary.index]}: run {summary.run_id} {summary.status} "
                  f"(counterpoint show {summary.run_id} --db {summary.store})", soft_wrap=True)
    if len(failed) > 10:
        out.print(f"  ... and {len(failed) - 10} more", soft_wrap=True)
    out.print(f"logs: {folder}/shard-N.db, one per shard (counterpoint runs --db "
              f"{folder}/shard-0.db)", soft_wrap=True)


def _as_json(summaries: list[RunSummary], seconds: float, folder: Path) -> dict[str, Any]:
    failed = sum(s.status != "succeeded" for s in summaries)
    return {"total": len(summaries), "succeeded": len(summaries) - failed, "failed": failed,
            "seconds": round(seconds, 3), "stores": str(folder),
            "runs": [{"index": s.index, "run_id": s.run_id, "status": s.status,
                      "output": s.output, "store": s.store} for s in summaries]}
