"""Every command that takes ``--db``, given a PostgreSQL URL, against the session's real
server: run / runs / show / trace, fork, approvals (list, approve, reject), the web view,
cancel from another process, a locked database, the web view's resume (the resume
races: tests/scheduler/test_claims.py).
The URL carries the password, as a user might write it: no output may show it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import urllib.request
from pathlib import Path

import pytest

from counterpoint.testing.postgres import PASSWORD, PostgresServer

GRAPH = """
from counterpoint import Graph

def first() -> int:
    return 1

def second(x: int) -> int:
    return x + 1

graph = Graph("pg")
graph.add("second", second, x=graph.add("first", first))
"""
APPROVALS = Path(__file__).resolve().parents[1] / "fixtures" / "approval_graph.py"


class Cli:
    """``counterpoint ... --db URL`` in a scratch folder, on a fresh database."""

    def __init__(self, folder: Path, url: str) -> None:
        self.folder, self.url = folder, url
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("COUNTERPOINT_DB", "PGPASSWORD", "FORCE_COLOR", "COLUMNS")}
        self.env.update(NO_COLOR="1", APPROVAL_DIR=str(folder))

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "counterpoint.cli", *args, "--db", self.url]

    def __call__(self, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(self.argv(*args), cwd=self.folder, env=self.env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == code, (args, done.stdout, done.stderr)
        assert PASSWORD not in done.stdout + done.stderr, (args, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr
        return done


@pytest.fixture
def cli(tmp_path: Path, postgres_server: PostgresServer) -> Cli:
    url = postgres_server.create_database().replace("postgres@", f"postgres:{PASSWORD}@")
    (tmp_path / "g.py").write_text(textwrap.dedent(GRAPH))
    return Cli(tmp_path, url)


def test_run_then_runs_show_and_trace_read_it_back(cli: Cli) -> None:
    ran = cli("run", "g.py")
    run_id = ran.stdout.split()[1].rstrip(":")
    # the hint runs as shown: its URL leaves the password out, for PGPASSWORD to give
    assert f"counterpoint show {run_id} --db postgresql://postgres@127.0.0.1:" in ran.stdout
    assert run_id in cli("runs").stdout
    shown = cli("show", run_id)
    assert "succeeded" in shown.stdout and "second" in shown.stdout
    dumped = json.loads(cli("show", run_id, "--json").stdout)  # the run, as data
    assert dumped["run_id"] == run_id and dumped["outputs"] == {"first": 1, "second": 2}
    cli("trace", run_id, "--out", str(cli.folder / "run.svg"))
    assert (cli.folder / "run.svg").read_text().lstrip().startswith("<svg")
    missing = cli("show", "r-nope", code=2)
    assert "not found in store postgresql://postgres:***@" in missing.stderr


def test_fork_reruns_from_a_node_and_reuses_the_rest(cli: Cli) -> None:
    run_id = json.loads(cli("run", "g.py", "--json", "--quiet").stdout)["run_id"]
    forked = json.loads(cli("fork", run_id, "--at", "second", "--json", "--quiet").stdout)
    assert forked["run_id"] != run_id and forked["outputs"]["second"] == 2
    assert forked["nodes"]["first"]["reused"] and not forked["nodes"]["second"]["reused"]
    listed = cli("runs").stdout
    assert run_id in listed and forked["run_id"] in listed


def test_approvals_are_listed_and_answered_across_processes(cli: Cli) -> None:
    ran = cli("run", f"{APPROVALS}:parallel", "--detach-waiting", "--quiet", code=3)
    assert "is waiting for approvals" in ran.stdout
    pending = {a["node"]: a for a in json.loads(cli("approvals", "--json").stdout)}
    assert sorted(pending) == ["a", "b"]
    assert "continues when it is resumed" in cli("approve", pending["b"]["id"],
                                                 "--no-resume").stdout
    rejected = cli("reject", pending["a"]["id"], "--reason", "not yet", "--quiet")
    assert f"run {pending['a']['run_id']} succeeded" in rejected.stdout
    outputs = json.loads(cli("show", pending["a"]["run_id"], "--json").stdout)["outputs"]
    assert outputs["fan_in"] == ["a:no (not yet)", "b:yes", "c"]


def test_the_web_view_serves_the_runs_of_the_database(cli: Cli) -> None:
    run_id = json.loads(cli("run", "g.py", "--json", "--quiet").stdout)["run_id"]
    proc = subprocess.Popen(cli.argv("ui", "--port", "0"), cwd=cli.folder, env=cli.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocks until the server prints its URL
        assert line.startswith("counterpoint ui: "), (line, proc.communicate(timeout=30))
        assert "store postgresql://postgres:***@" in line and PASSWORD not in line
        with urllib.request.urlopen(line.split()[2] + "api/runs", timeout=30) as response:
            runs = json.load(response)["runs"]
        assert [r["run_id"] for r in runs] == [run_id]
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


WAITING = """
import asyncio
from counterpoint import Graph

def first() -> int:
    return 1

async def second(x: int) -> int:
    await asyncio.Event().wait()  # until the run is cancelled
    return x

graph = Graph("pg-waits")
graph.add("second", second, x=graph.add("first", first))
"""


def test_cancel_from_another_process_stops_the_live_run(cli: Cli) -> None:
    (cli.folder / "waits.py").write_text(textwrap.dedent(WAITING))
    proc = subprocess.Popen(cli.argv("run", "waits.py"), cwd=cli.folder, env=cli.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        run_id = proc.stdout.readline().split()[1].rstrip(":")
        for line in proc.stdout:  # blocking reads until "second" holds the run
            if "first succeeded" in line:
                break
        cancelled = cli("cancel", run_id, "--wait", "60")
        assert f"run {run_id} cancelled" in cancelled.stdout
    finally:
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, (out, err)
    assert json.loads(cli("show", run_id, "--json").stdout)["status"] == "cancelled"


def test_a_locked_database_is_one_error_line_and_exit_2(cli: Cli) -> None:
    import psycopg

    from counterpoint.store.postgres_schema import MIGRATION_LOCK

    with psycopg.connect(cli.url) as locker:  # another process migrates the new database
        locker.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
        unmigrated = cli("run", "g.py", code=2)
        locker.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))
    assert "run r-" not in unmigrated.stdout  # no id is shown for a run never recorded
    cli("run", "g.py", "--quiet")  # migrates the database
    with psycopg.connect(cli.url) as locker:  # writes blocked: the run's first events
        locker.execute("LOCK TABLE cp_events IN ACCESS EXCLUSIVE MODE")
        failed = cli("run", "g.py", "--quiet", code=2)
        locker.rollback()
    for done in (unmigrated, failed):  # one line, no traceback (not even a stray task's)
        assert done.stderr.startswith("error: store postgresql://postgres:***@")
        assert "the database is locked by another process" in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr


RESUMABLE = """
import asyncio
from pathlib import Path
from counterpoint import Graph

def first() -> int:
    return 1

async def second(x: int) -> int:
    while not (Path(__file__).parent / "release").exists():  # holds the run until told
        await asyncio.sleep(0.01)
    return x + 1

graph = Graph("pg-resumable")
graph.add("second", second, x=graph.add("first", first))
"""


def test_the_web_views_resume_reaches_the_database(
        cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    from counterpoint.ids import RunId
    from counterpoint.store import open_store
    from counterpoint.ui.control import resume

    (cli.folder / "resumable.py").write_text(textwrap.dedent(RESUMABLE))
    proc = subprocess.Popen(cli.argv("run", "resumable.py"), cwd=cli.folder, env=cli.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    run_id = RunId(proc.stdout.readline().split()[1].rstrip(":"))
    for line in proc.stdout:  # blocking reads until "second" holds the run
        if "first succeeded" in line:
            break
    proc.kill()  # the run is interrupted
    proc.communicate(timeout=60)
    (cli.folder / "release").touch()
    monkeypatch.delenv("PGPASSWORD")  # the resuming process logs in with the URL's password
    store = open_store(cli.url)
    try:
        outcome = resume(store, run_id, cwd=cli.folder)
        assert outcome.status == 202 and outcome.pid is not None, outcome.message
        try:
            _, status = os.waitpid(outcome.pid, 0)  # it is this process's child
            assert os.waitstatus_to_exitcode(status) == 0
        except ChildProcessError:
            pass  # resume() reaped it already: it saw exit code 0 (else it answers 409)
        assert store.run(run_id).status == "succeeded"
    finally:
        store.close()
