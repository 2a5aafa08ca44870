"""A sub-run is resumed with its run tree, by resuming the top-level run: resuming it on
its own is refused, naming the run to resume. It used to run the sub-run in a process of
its own, beside a resume of the top-level run, which ran it too (its effect twice)."""

from __future__ import annotations

from pathlib import Path

from support import run_cli

FLOW = '''
import os
from pathlib import Path

import counterpoint as cp

HERE = Path(__file__).parent


async def work(ctx: cp.NodeContext, item: str) -> str:
    """An effect; the first time, its process dies once the log is durable."""
    with (HERE / "marks").open("a") as marks:
        marks.write(f"work {item} {ctx.attempt}\\n")
    if not (HERE / "died").exists():
        (HERE / "died").touch()
        await ctx.flush()
        os._exit(9)
    return item.upper()


per_item = cp.Graph("per-item")
per_item.add("work", work, item=per_item.input("item"))
graph = cp.Graph("fan")
graph.add("one", per_item, item="a")
'''


def test_a_sub_run_is_not_resumed_on_its_own(tmp_path: Path) -> None:
    (tmp_path / "fan.py").write_text(FLOW)
    crashed = run_cli("run", "fan.py:graph", "-q", "--db", "runs.db", cwd=tmp_path)
    assert crashed.returncode == 9, crashed.stderr
    listed = run_cli("runs", "--sub-runs", "--db", "runs.db", cwd=tmp_path).stdout
    root = next(line.split()[0] for line in listed.splitlines()[1:] if "/" not in line.split()[0])
    refused = run_cli("resume", f"{root}/one", "--db", "runs.db", cwd=tmp_path)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert (f"run {root}/one is a sub-run of run {root}, which resumes it with the rest of "
            f"its run tree: `counterpoint resume {root}`") in refused.stderr.replace("\n", "")
    assert (tmp_path / "marks").read_text().splitlines() == ["work a 1"]  # nothing ran
    resumed = run_cli("resume", root, "-q", "--json", "--db", "runs.db", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert (tmp_path / "marks").read_text().splitlines() == ["work a 1", "work a 2"]
