"""A run is executed by one process at a time: resumes claim it atomically in the store.

Real processes throughout: a run is interrupted by a real SIGKILL, then resumed by two
``counterpoint resume`` processes started together, or by one while the original runs.
Each test runs on a SQLite file and on a database of the session's real PostgreSQL
server (``--db postgresql://...``): the same claim rule, two implementations.
"""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

GRAPH = """
import asyncio, os, signal
from pathlib import Path
import counterpoint as cp

HERE = Path(__file__).parent

def first() -> int:
    with open(HERE / "first.txt", "a") as f:
        f.write(f"{os.getpid()}\\n")
    return 1

async def second(x: int, ctx: cp.NodeContext) -> int:
    with open(HERE / "second.txt", "a") as f:
        f.write(f"{os.getpid()}\\n")
    if (HERE / "crash").exists():
        (HERE / "crash").unlink()
        os.kill(os.getpid(), signal.SIGKILL)  # the process dies in the middle of the run
    await ctx.flush()  # first's success is durable: a crash from here re-runs only this
    print("second holds the run", flush=True)
    while not (HERE / "release").exists():  # the step holds the run until the test says
        await asyncio.sleep(0.01)
    return x + 1

graph = cp.Graph("claimed")
graph.add("second", second, x=graph.add("first", first))
"""


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The ``--db`` of the test's store: a SQLite file, or a fresh database on the
    session's PostgreSQL server (whose password the environment holds)."""
    if request.param == "sqlite":
        return str(tmp_path / "runs.db")
    return str(request.getfixturevalue("postgres_server").create_database())


def _cli(folder: Path, db: str, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "COUNTERPOINT_DB"}
    env["NO_COLOR"] = "1"
    return subprocess.Popen([sys.executable, "-m", "counterpoint.cli", *args, "--db", db],
                            cwd=folder, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _running(folder: Path, db: str) -> tuple[subprocess.Popen[str], str]:
    """``counterpoint run`` of the graph, once its node ``second`` holds the run (its id
    is printed once the run is durable; ``second`` prints its line once ``first``'s
    success is durable too)."""
    (folder / "claimed.py").write_text(textwrap.dedent(GRAPH))
    proc = _cli(folder, db, "run", "claimed.py")
    assert proc.stdout is not None
    run_id = None
    for line in proc.stdout:  # a blocking read of the progress lines, not a poll
        if line.startswith("run ") and run_id is None:
            run_id = line.split()[1].rstrip(":")
        if line == "second holds the run\n":
            break
    else:
        raise AssertionError(proc.communicate())
    assert run_id is not None
    return proc, run_id


def _interrupted_run(folder: Path, db: str) -> str:
    proc, run_id = _running(folder, db)
    proc.kill()  # SIGKILL while "second" runs
    proc.communicate(timeout=60)
    return run_id


def test_two_resumes_at_once_run_the_interrupted_nodes_once(tmp_path: Path, db: str) -> None:
    """Regression: both resumes ran the interrupted node (side effects twice); the loser
    failed only at its first write, with a UNIQUE constraint error."""
    run_id = _interrupted_run(tmp_path, db)
    before = (tmp_path / "second.txt").read_text().split()
    a, b = _cli(tmp_path, db, "resume", run_id), _cli(tmp_path, db, "resume", run_id)
    # the loser ends on its own, while the winner's step still holds the run: wait for
    # the first of the two to exit (a pidfd becomes readable when its process ends)
    pidfds = {os.pidfd_open(proc.pid): proc for proc in (a, b)}
    try:
        ended, _, _ = select.select(list(pidfds), [], [], 60)
    finally:
        for fd in pidfds:
            os.close(fd)
    assert len(ended) == 1, "exactly one resume must lose the claim"
    loser = pidfds[ended[0]]
    _, err = loser.communicate(timeout=60)
    winner = b if loser is a else a
    assert loser.returncode == 2, err
    assert (f"run {run_id} is being resumed by process {winner.pid} on "
            f"{socket.gethostname()}") in err
    assert "Traceback" not in err
    (tmp_path / "release").touch()
    _, err = winner.communicate(timeout=120)
    assert winner.returncode == 0, err
    after = (tmp_path / "second.txt").read_text().split()
    assert len(after) == len(before) + 1  # the interrupted node ran again once, not twice
    assert after[-1] == str(winner.pid)
    assert len((tmp_path / "first.txt").read_text().split()) == 1  # its success was logged


def test_a_resume_while_the_original_still_runs_is_refused(tmp_path: Path, db: str) -> None:
    original, run_id = _running(tmp_path, db)
    try:
        late = _cli(tmp_path, db, "resume", run_id)
        out, err = late.communicate(timeout=60)
        assert late.returncode == 2, (out, err)
        assert f"run {run_id} is still running in process {original.pid}" in err
        assert "Traceback" not in err
    finally:
        (tmp_path / "release").touch()
        out, err = original.communicate(timeout=120)
    assert original.returncode == 0, err
    assert len((tmp_path / "second.txt").read_text().split()) == 1


HOLDER = """
import asyncio, sys
import counterpoint as cp

try:
    asyncio.run(cp.resume(sys.argv[1], store=sys.argv[2]))
except cp.CounterpointError as exc:
    print(f"resume failed: {exc}", flush=True)
sys.stdin.read()  # lives on, as a notebook or an MCP server does, until its input ends
"""


def test_a_failed_resume_gives_back_its_claim(tmp_path: Path, db: str) -> None:
    """Regression: a resume that failed after claiming the run (here its graph file no
    longer imports) left the claim in the store; while its process lived on, every other
    resume was refused with "being resumed by process P", P resuming nothing."""
    run_id = _interrupted_run(tmp_path, db)
    graph = (tmp_path / "claimed.py").read_text()
    (tmp_path / "claimed.py").write_text(graph + "\nraise RuntimeError('broken')\n")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, run_id, db], cwd=tmp_path,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        said = holder.stdout.readline()  # once its resume failed; it lives on
        assert said.startswith("resume failed: ") and "importing it raised RuntimeError" \
            in said, said
        (tmp_path / "claimed.py").write_text(graph)
        (tmp_path / "release").touch()
        resumed = _cli(tmp_path, db, "resume", run_id)
        out, err = resumed.communicate(timeout=120)
    finally:
        holder.communicate("", timeout=60)
    assert resumed.returncode == 0, (out, err)
    assert len((tmp_path / "second.txt").read_text().split()) == 2
