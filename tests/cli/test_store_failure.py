"""``counterpoint run`` when its store fails in the middle of a run (a full disk, a file
taken away): the error says which run stopped and how to continue it, and the resume
goes on from what was recorded."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from support import run_cli

GRAPH = '''
import sqlite3
from pathlib import Path

import counterpoint as cp

HERE = Path(__file__).parent


def count(name: str) -> None:
    with (HERE / f"{name}.calls").open("a") as calls:
        calls.write("x\\n")


async def before() -> int:
    count("before")
    return 1


async def breaker(ctx: cp.NodeContext, x: int) -> int:
    """The first time only: once what came before is durable, takes the log's table away,
    so the store's next write fails as a full disk makes it fail."""
    count("breaker")
    await ctx.flush()
    if not (HERE / "broken").exists():
        (HERE / "broken").touch()
        with sqlite3.connect(HERE / "runs.db", timeout=30) as conn:
            conn.execute("ALTER TABLE segments RENAME TO segments_away")
    return x + 1


async def after(x: int) -> int:
    count("after")
    return x * 10


graph = cp.Graph("fragile")
graph.add("after", after, x=graph.add("breaker", breaker, x=graph.add("before", before)))
'''


def _calls(cwd: Path, name: str) -> int:
    path = cwd / f"{name}.calls"
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_a_store_failing_mid_run_names_the_run_and_the_resume(tmp_path: Path) -> None:
    (tmp_path / "flow.py").write_text(GRAPH)
    failed = run_cli("run", "flow.py", "-q", "--db", "runs.db", cwd=tmp_path)
    assert failed.returncode == 2, (failed.stdout, failed.stderr)
    assert "Traceback" not in failed.stderr
    found = re.search(r"no such table: segments; run (r-\S+) stopped, its log whole up to "
                      r"the failure: fix the cause \(e\.g\. free disk space\), then continue "
                      r"it with `counterpoint resume (r-\S+) --db runs.db`", failed.stderr)
    assert found is not None, failed.stderr
    run_id = found.group(1)
    assert found.group(2) == run_id
    with sqlite3.connect(tmp_path / "runs.db") as conn:  # the cause fixed
        conn.execute("ALTER TABLE segments_away RENAME TO segments")
    resumed = run_cli("resume", run_id, "-q", "--db", "runs.db", cwd=tmp_path)
    assert resumed.returncode == 0, (resumed.stdout, resumed.stderr)
    shown = run_cli("show", run_id, "--json", "--db", "runs.db", cwd=tmp_path)
    assert '"after": 20' in shown.stdout.replace("\n", " ") or '"after":20' in shown.stdout
    assert _calls(tmp_path, "before") == 1  # recorded before the failure: not run again
    assert _calls(tmp_path, "breaker") == 2  # its success was not recorded: it runs again


KILLS_ITS_WRITER = '''
import os
import signal
from pathlib import Path

import counterpoint as cp

HERE = Path(__file__).parent


def writers() -> list[int]:
    """The store's writer processes: children of this process running store/writer.py."""
    found = []
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        for child in (task / "children").read_text().split():
            if "writer" in Path(f"/proc/{child}/cmdline").read_bytes().decode():
                found.append(int(child))
    return found


async def before() -> int:
    return 1


async def killer(ctx: cp.NodeContext, x: int) -> int:
    """The first time only: once what came before is durable, SIGKILLs the store's writer
    process (as the OOM killer would), then writes again."""
    await ctx.flush()
    if not (HERE / "killed").exists():
        (HERE / "killed").touch()
        [writer] = writers()
        os.kill(writer, signal.SIGKILL)
        ctx.log("after the kill")
        await ctx.flush()
    return x + 1


graph = cp.Graph("orphaned")
graph.add("after", killer, x=graph.add("before", before))
'''


def test_a_killed_writer_process_is_named_and_the_run_resumes(tmp_path: Path) -> None:
    """It said "fix the cause (e.g. free disk space)" for a writer process that was
    killed: nothing was wrong with the disk."""
    (tmp_path / "flow.py").write_text(KILLS_ITS_WRITER)
    failed = run_cli("run", "flow.py", "-q", "--db", "runs.db", cwd=tmp_path)
    assert failed.returncode == 2, (failed.stdout, failed.stderr)
    assert "Traceback" not in failed.stderr
    error = " ".join(failed.stderr.split())
    assert "disk" not in error, error
    found = re.search(r"store \S*runs\.db: writing failed: its writer process \(pid \d+\) "
                      r"ended \(killed by signal 9, SIGKILL\); run (r-\S+) stopped, its log "
                      r"whole up to the failure: continue it with `counterpoint resume "
                      r"(r-\S+) --db runs.db`", error)
    assert found is not None, error
    assert found.group(1) == found.group(2)
    resumed = run_cli("resume", found.group(1), "-q", "--json", "--db", "runs.db",
                      cwd=tmp_path)
    assert resumed.returncode == 0, (resumed.stdout, resumed.stderr)
    assert '"after": 2' in resumed.stdout
