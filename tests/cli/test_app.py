"""The ``counterpoint`` command, driven as a user drives it: real subprocesses, each with
its own store and working directory. The last tests check, in process, that a run
rebuilt from its log alone (``show``) agrees with the run itself."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from support import wait_until

import counterpoint as cp
from counterpoint.cli.live import Tally, render_live
from counterpoint.cli.projection import project
from counterpoint.metrics import compute
from counterpoint.store import SQLiteStore

RUN_ID = re.compile(r"r-\d{8}-\d{6}-[0-9a-f]+")

OK = """
from counterpoint import Graph

graph = Graph("ok")

def fetch() -> list[int]:
    return [1, 2, 3]

def total(xs: list[int]) -> int:
    return sum(xs)

graph.add("total", total, xs=graph.add("fetch", fetch))
"""

BROKEN = """
from counterpoint import Graph

graph = Graph("broken")

def first() -> int:
    return 1

def explode(x: int) -> int:
    raise ValueError(f"cannot explode {x}")

def after(y: int) -> int:
    return y

graph.add("after", after, y=graph.add("explode", explode, x=graph.add("first", first)))
"""

SCALED = """
from counterpoint import Graph

def scale(n: int, factor: int) -> int:
    return n * factor

def build() -> Graph:
    graph = Graph("scaled")
    graph.add("scale", scale, n=graph.input("n", int), factor=graph.input("factor", int))
    return graph
"""

TWO = """
from counterpoint import Graph

def one() -> int:
    return 1

first = Graph("first")
first.add("one", one)
second = Graph("second")
second.add("one", one)
"""

MANY = """
from counterpoint import Graph

graph = Graph("many")

def items() -> list[int]:
    return list(range(40))

def check(i: int) -> int:
    if i == 33:
        raise ValueError(f"item {i} is bad")
    return i

graph.map("check", check, over=graph.add("items", items))
"""

# `wait` blocks until the test creates the file `release`; every step appends its name to
# `executions.log`, so a test can count how often each one ran across processes.
SLOW = """
import asyncio
from pathlib import Path

from counterpoint import Graph

HERE = Path(__file__).parent

def record(name: str) -> None:
    with (HERE / "executions.log").open("a") as log:
        log.write(name + "\\n")

def first() -> int:
    record("first")
    return 1

async def wait(x: int) -> int:
    record("wait")
    for _ in range(6000):  # at most 5 min if a test never releases it (a loaded machine
        # can take 30 s to reach the point where the test acts)
        if (HERE / "release").exists():
            return x + 1
        await asyncio.sleep(0.05)
    raise TimeoutError("never released")

def last(y: int) -> int:
    record("last")
    return y * 10

graph = Graph("slow")
graph.add("last", last, y=graph.add("wait", wait, x=graph.add("first", first)))
"""


# ------------------------------------------------------------------ helpers
def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("COUNTERPOINT_DB", "FORCE_COLOR", "COLUMNS")}
    env["NO_COLOR"] = "1"
    return env


class Workdir:
    """A working directory with a store, in which the CLI runs as a subprocess."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.db = str(path / "runs.db")

    def write(self, name: str, source: str) -> Path:
        file = self.path / name
        file.write_text(textwrap.dedent(source))
        return file

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "counterpoint.cli", *args]

    def cli(self, *args: str, db: bool = True) -> subprocess.CompletedProcess[str]:
        argv = self.argv(*args, *(("--db", self.db) if db else ()))
        return subprocess.run(argv, cwd=self.path, env=_env(), capture_output=True, text=True,
                              timeout=120)

    def start(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(self.argv(*args, "--db", self.db), cwd=self.path, env=_env(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                text=True)

    def show(self, run_id: str) -> dict[str, Any]:
        done = self.cli("show", run_id, "--json")
        assert done.returncode == 0, done.stderr
        data: dict[str, Any] = json.loads(done.stdout)
        return data

    def executions(self) -> list[str]:
        log = self.path / "executions.log"
        return log.read_text().split() if log.exists() else []


@pytest.fixture
def work(tmp_path: Path) -> Workdir:
    return Workdir(tmp_path)


def _run_id(text: str) -> str:
    found = RUN_ID.search(text)
    assert found is not None, f"no run id in {text!r}"
    return found.group(0)


def _running_run(work: Workdir) -> str:
    """The id of the run of SLOW once `wait` runs and `runs` lists the run as running."""
    wait_until(lambda: "wait" in work.executions(), "the slow step to start")

    def listed() -> str | None:
        listing = work.cli("runs")
        return _run_id(listing.stdout) if "running" in listing.stdout else None

    run_id: str = wait_until(listed, "the run to be listed as running")
    return run_id


@pytest.fixture
def killed_run(work: Workdir) -> Iterator[str]:
    """The id of a run of SLOW whose process was SIGKILLed while `wait` ran."""
    work.write("slow.py", SLOW)
    proc = work.start("run", "slow.py", "--quiet")
    try:
        run_id = _running_run(work)

        def first_is_durable() -> bool:
            nodes = work.show(run_id)["nodes"]
            return bool(nodes["first"]["status"] == "succeeded"
                        and nodes["wait"]["status"] == "running")

        wait_until(first_is_durable, "first's success to reach the log")
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
        yield run_id
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# ------------------------------------------------------------------ run
def test_version(work: Workdir) -> None:
    done = work.cli("--version", db=False)
    assert done.returncode == 0
    assert done.stdout.strip() == f"counterpoint {cp.__version__}"


def test_run_success_prints_summary(work: Workdir) -> None:
    work.write("ok.py", OK)
    done = work.cli("run", "ok.py")
    assert done.returncode == 0, done.stderr
    run_id = _run_id(done.stdout)
    assert "fetch succeeded" in done.stdout  # one plain line per node when piped
    assert "total succeeded" in done.stdout
    for label in ("makespan", "critical path", "makespan / critical path", "parallel width",
                  "total run time", "retries"):
        assert label in done.stdout
    assert "fetch -> total" in done.stdout
    assert f"counterpoint show {run_id} --db {work.db}" in done.stdout


def test_run_failure_exits_1_with_cause(work: Workdir) -> None:
    work.write("broken.py", BROKEN)
    done = work.cli("run", "broken.py")
    assert done.returncode == 1, done.stderr
    assert "explode failed: ValueError: cannot explode 1" in done.stdout
    assert "node 'after' blocked: upstream 'explode' failed: cannot explode 1" in done.stdout


def test_run_summary_caps_rows_but_keeps_failures(work: Workdir) -> None:
    work.write("many.py", MANY)
    done = work.cli("run", "many.py")
    assert done.returncode == 1
    summary = done.stdout[done.stdout.index("node  "):]
    assert "check[33]  failed" in summary
    assert "check      blocked" in summary
    assert "... and 12 more nodes" in summary  # 42 nodes: 40 spawned, the join, items
    assert "check[33] failed: ValueError: item 33 is bad" in summary


def test_run_options(work: Workdir) -> None:
    # a limit must name a resource a node holds (tests/cli/test_run_limits.py)
    work.write("ok.py", OK.replace('graph.add("fetch", fetch)',
                                   'graph.add("fetch", fetch, resources={"openai": 1})'))
    done = work.cli("run", "ok.py", "--max-concurrency", "2", "--limit", "openai=3",
                    "--fail-fast", "--json")
    assert done.returncode == 0, done.stderr
    store = SQLiteStore(work.db)
    try:
        options = store.run(json.loads(done.stdout)["run_id"]).options
    finally:
        store.close()
    assert options["max_concurrency"] == 2
    assert options["limits"] == {"openai": 3}
    assert options["fail_fast"] is True


def test_run_deadline(work: Workdir) -> None:
    work.write("slow.py", SLOW)
    done = work.cli("run", "slow.py", "--deadline", "0.3")
    assert done.returncode == 1
    assert "timed_out" in done.stdout
    assert "deadline passed" in done.stdout


def test_run_json_with_inputs_and_function_target(work: Workdir) -> None:
    work.write("scaled.py", SCALED)
    done = work.cli("run", "scaled.py:build", "--input", "n=7", "--input", "factor=6", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "succeeded"
    assert result["outputs"] == {"scale": 42}
    assert RUN_ID.fullmatch(result["run_id"])
    assert result["metrics"]["critical_path_nodes"] == ["scale"]
    assert result["metrics"]["retries"] == 0
    assert set(result["metrics"]) >= {"makespan", "critical_path", "mean_parallel_width",
                                      "peak_parallel_width", "total_run_time"}


REPEAT = """
from counterpoint import Graph

def repeat(word, times: int) -> str:
    return word * times

graph = Graph("repeat")
graph.add("repeat", repeat, word=graph.input("word"), times=graph.input("times", int))
"""


def test_text_input_and_quiet(work: Workdir) -> None:
    work.write("repeat.py", REPEAT)
    done = work.cli("run", "repeat.py", "--input", "word=oops", "--input", 'times="2"',
                    "--quiet")
    assert done.returncode == 0, done.stderr
    assert "repeat succeeded" not in done.stdout  # no progress lines with --quiet
    assert "makespan" in done.stdout
    run_id = _run_id(done.stdout)
    # "oops" is not JSON: passed as text; the JSON string "2" fits the input's int
    assert work.show(run_id)["outputs"] == {"repeat": "oopsoops"}


def test_an_input_that_does_not_fit_its_declared_type_is_refused_before_the_run(
        work: Workdir) -> None:
    """Regression: ``--input n=oops`` for an input declared ``int`` started the run, and
    its step failed with ``TypeError`` (or, for a step that multiplies, succeeded with
    "oopsoops")."""
    work.write("scaled.py", SCALED)
    for given, reason in [("n=oops", "unable to parse string as an integer"),
                          ("n=2.5", "got a number with a fractional part"),
                          ("n=1e400", "Input should be a finite number")]:
        done = work.cli("run", "scaled.py:build", "--input", given, "--input", "factor=2")
        assert done.returncode == 2, done.stdout
        assert "scaled.py: graph 'scaled', input 'n' must be int, got " in done.stderr
        assert reason in done.stderr and "Traceback" not in done.stderr
    runs = work.cli("runs")
    assert "scaled" not in runs.stdout  # nothing was recorded


def test_run_module_target(work: Workdir) -> None:
    package = work.path / "pipelines"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "daily.py").write_text(textwrap.dedent(OK))
    done = work.cli("run", "pipelines.daily:graph")
    assert done.returncode == 0, done.stderr


def test_runs_lists_newest_first(work: Workdir) -> None:
    work.write("ok.py", OK)
    work.write("broken.py", BROKEN)
    first = json.loads(work.cli("run", "ok.py", "--json").stdout)["run_id"]
    second = json.loads(work.cli("run", "broken.py", "--json").stdout)["run_id"]
    done = work.cli("runs")
    assert done.returncode == 0, done.stderr
    assert RUN_ID.findall(done.stdout) == [second, first]
    rows = done.stdout.splitlines()
    assert "broken" in rows[1] and "failed" in rows[1]
    assert "ok" in rows[2] and "succeeded" in rows[2]
    assert RUN_ID.findall(work.cli("runs", "--limit", "1").stdout) == [second]


def test_runs_without_a_store(work: Workdir) -> None:
    done = work.cli("runs")
    assert done.returncode == 0
    assert "no runs" in done.stdout
    assert not Path(work.db).exists()  # listing never creates a store


# ------------------------------------------------------------------ show
def test_show_rebuilds_a_run_without_its_code(work: Workdir) -> None:
    work.write("broken.py", BROKEN)
    run_id = json.loads(work.cli("run", "broken.py", "--json").stdout)["run_id"]
    (work.path / "broken.py").unlink()  # show must not import the graph's file
    done = work.cli("show", run_id)
    assert done.returncode == 0, done.stderr
    assert f"run {run_id}" in done.stdout
    assert "broken" in done.stdout and "failed" in done.stdout
    assert "explode failed: ValueError: cannot explode 1" in done.stdout
    assert "makespan" in done.stdout
    data = work.show(run_id)
    assert data["status"] == "failed"
    assert data["outputs"] == {"first": 1}
    assert {k: v["status"] for k, v in data["nodes"].items()} == {
        "first": "succeeded", "explode": "failed", "after": "blocked"}
    assert data["nodes"]["explode"]["error"]["type"] == "ValueError"


def test_show_unknown_run(work: Workdir) -> None:
    work.write("ok.py", OK)
    assert work.cli("run", "ok.py").returncode == 0
    done = work.cli("show", "r-nope")
    assert done.returncode == 2
    assert "r-nope" in done.stderr
    assert done.stderr.startswith("error: ")
    assert "Traceback" not in done.stderr


def test_show_without_a_store(work: Workdir) -> None:
    done = work.cli("show", "r-nope")
    assert done.returncode == 2
    assert "r-nope" in done.stderr and work.db in done.stderr
    assert not Path(work.db).exists()


# ------------------------------------------------------------------ usage errors
def test_missing_file(work: Workdir) -> None:
    done = work.cli("run", "nowhere.py")
    assert done.returncode == 2
    assert done.stderr.startswith("error: ") and "nowhere.py" in done.stderr
    assert "Traceback" not in done.stderr


def test_file_without_a_graph(work: Workdir) -> None:
    work.write("empty.py", "X = 1\n")
    done = work.cli("run", "empty.py")
    assert done.returncode == 2
    assert "empty.py" in done.stderr and "no Graph" in done.stderr


def test_several_graphs_need_a_name(work: Workdir) -> None:
    work.write("two.py", TWO)
    done = work.cli("run", "two.py")
    assert done.returncode == 2
    assert "two.py" in done.stderr and "first" in done.stderr and "second" in done.stderr
    assert work.cli("run", "two.py:second").returncode == 0


def test_missing_input(work: Workdir) -> None:
    work.write("scaled.py", SCALED)
    done = work.cli("run", "scaled.py:build", "--input", "n=1")
    assert done.returncode == 2
    assert "factor" in done.stderr and "scaled" in done.stderr


@pytest.mark.parametrize("value", ["openai", "=4", "openai=many"])
def test_bad_limit(work: Workdir, value: str) -> None:
    work.write("ok.py", OK)
    done = work.cli("run", "ok.py", "--limit", value)
    assert done.returncode == 2
    assert "--limit" in done.stderr
    assert not Path(work.db).exists()  # rejected before anything was opened


def test_bad_deadline(work: Workdir) -> None:
    work.write("ok.py", OK)
    done = work.cli("run", "ok.py", "--deadline", "0")
    assert done.returncode == 2
    assert "deadline" in done.stderr


def test_corrupt_store_is_left_untouched(work: Workdir) -> None:
    work.write("ok.py", OK)
    garbage = b"not a database at all\n" * 200
    Path(work.db).write_bytes(garbage)
    for args in (("run", "ok.py"), ("runs",), ("show", "r-x")):
        done = work.cli(*args)
        assert done.returncode == 2, args
        assert done.stderr.startswith("error: ") and work.db in done.stderr, args
        assert "Traceback" not in done.stderr
    assert Path(work.db).read_bytes() == garbage
    assert sorted(p.name for p in work.path.iterdir()) == ["ok.py", "runs.db"]


# ------------------------------------------------------------------ cancel and resume
def test_cancel_a_finished_run(work: Workdir) -> None:
    work.write("ok.py", OK)
    run_id = json.loads(work.cli("run", "ok.py", "--json").stdout)["run_id"]
    done = work.cli("cancel", run_id)
    assert done.returncode == 0
    assert f"run {run_id} already finished: succeeded" in done.stdout
    assert work.show(run_id)["status"] == "succeeded"


def test_cancel_unknown_run(work: Workdir) -> None:
    work.write("ok.py", OK)
    assert work.cli("run", "ok.py").returncode == 0
    done = work.cli("cancel", "r-nope")
    assert done.returncode == 2 and "r-nope" in done.stderr


def test_cancel_a_live_run(work: Workdir) -> None:
    work.write("slow.py", SLOW)
    proc = work.start("run", "slow.py", "--quiet")
    try:
        run_id = _running_run(work)
        done = work.cli("cancel", run_id, "--wait", "30")
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"run {run_id} cancelled" in done.stdout
        assert proc.wait(timeout=30) == 1  # the run's own exit code: cancelled
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    data = work.show(run_id)
    assert data["status"] == "cancelled"
    assert data["nodes"]["wait"]["status"] == "cancelled"
    assert data["nodes"]["last"]["status"] == "cancelled"
    assert work.executions() == ["first", "wait"]


def _sigint_as_at_a_terminal() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _stopped_by_a_signal(work: Workdir, stop: Callable[[subprocess.Popen[str]], None],
                         **popen: Any) -> tuple[str, int, str]:
    """Start ``run slow.py``, wait for its first node's success to reach the log, then
    ``stop`` it: (run id, exit code, stderr)."""
    work.write("slow.py", SLOW)
    proc = subprocess.Popen(work.argv("run", "slow.py", "--quiet", "--db", work.db),
                            cwd=work.path, env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **popen)
    try:
        run_id = _running_run(work)
        wait_until(lambda: work.show(run_id)["nodes"]["first"]["status"] == "succeeded",
                   "first's success to reach the log")
        stop(proc)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return run_id, proc.returncode, err


def _resumes_keeping_first(work: Workdir, run_id: str) -> None:
    """The stopped run is interrupted, and a resume finishes it without running its first
    node again."""
    assert work.show(run_id)["status"] == "interrupted"
    (work.path / "release").touch()
    done = work.cli("resume", run_id)
    assert done.returncode == 0, done.stdout + done.stderr
    assert work.show(run_id)["status"] == "succeeded"
    assert work.executions() == ["first", "wait", "wait", "last"]  # first's success kept


def test_ctrl_c_stops_the_run_cleanly_and_it_resumes(work: Workdir) -> None:
    """Ctrl-C reaches the terminal's whole foreground process group; the store's writer
    process must survive it to commit what the interrupted run recorded."""
    # as at a terminal, SIGINT is not ignored in the run's process: a test suite started in
    # the background of a non-interactive shell (`bash -c '... &'`) inherits SIGINT ignored,
    # and a process started with it ignored keeps ignoring it (as nohup'd commands do)
    run_id, code, err = _stopped_by_a_signal(
        work, lambda proc: os.killpg(proc.pid, signal.SIGINT),  # what the terminal does
        start_new_session=True, preexec_fn=_sigint_as_at_a_terminal)
    assert code == 130, err
    assert f"interrupted: run {run_id} stopped; continue it with `counterpoint resume " \
           f"{run_id}" in err
    assert "writing failed" not in err
    _resumes_keeping_first(work, run_id)


def test_sigterm_stops_the_run_cleanly_and_it_resumes(work: Workdir) -> None:
    """What ``docker stop`` or ``systemctl stop`` send: the run stops as on Ctrl-C, says
    how to continue, exits 143, and its log keeps every success recorded before."""
    run_id, code, err = _stopped_by_a_signal(
        work, lambda proc: proc.send_signal(signal.SIGTERM))  # to the run's process alone
    assert code == 143, err
    assert f"terminated (SIGTERM): run {run_id} stopped; continue it with `counterpoint " \
           f"resume {run_id}" in err
    assert "Traceback" not in err and "writing failed" not in err
    _resumes_keeping_first(work, run_id)


def test_cancel_a_killed_run(work: Workdir, killed_run: str) -> None:
    assert "interrupted" in work.cli("runs").stdout
    assert work.show(killed_run)["status"] == "interrupted"
    done = work.cli("cancel", killed_run)
    assert done.returncode == 0, done.stderr
    assert f"run {killed_run} cancelled" in done.stdout
    assert "can no longer be resumed" in done.stdout
    data = work.show(killed_run)
    assert data["status"] == "cancelled"
    assert data["nodes"]["wait"]["status"] == "interrupted"
    shown = work.cli("show", killed_run).stdout
    assert "cancelled while not running" in shown
    # resuming finds the run finished and runs nothing
    (work.path / "release").touch()
    resumed = work.cli("resume", killed_run)
    assert resumed.returncode == 1
    assert "nothing to resume" in resumed.stdout
    assert work.executions() == ["first", "wait"]


def test_resume_a_killed_run(work: Workdir, killed_run: str) -> None:
    (work.path / "release").touch()
    done = work.cli("resume", killed_run)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "makespan" in done.stdout and killed_run in done.stdout
    # `first` finished before the kill and is not run again; `wait` was in flight
    assert work.executions() == ["first", "wait", "wait", "last"]
    data = work.show(killed_run)
    assert data["status"] == "succeeded"
    assert data["outputs"] == {"first": 1, "wait": 2, "last": 20}
    assert data["nodes"]["wait"]["attempts"] == 2
    again = work.cli("resume", killed_run, "--json")
    assert again.returncode == 0
    assert json.loads(again.stdout)["status"] == "succeeded"
    assert work.executions() == ["first", "wait", "wait", "last"]


def test_resume_unknown_run(work: Workdir) -> None:
    work.write("ok.py", OK)
    assert work.cli("run", "ok.py").returncode == 0
    done = work.cli("resume", "r-nope")
    assert done.returncode == 2 and "r-nope" in done.stderr


# ------------------------------------------------------------------ the log projection
def _double(x: int) -> int:
    return x * 2


def _flaky_factory() -> Callable[[], list[int]]:
    calls = {"n": 0}

    def items() -> list[int]:
        calls["n"] += 1
        if calls["n"] == 1:
            raise cp.Retry("first attempt fails")
        return [1, 2, 3]

    return items


def _extra(total: Any) -> int:  # Any: the core types a map's join as its step's item type
    return sum(total)


def _grow(ctx: cp.NodeContext, values: list[int]) -> int:
    edit = cp.Edit("add a node")
    edit.add("extra", _extra, total=cp.ref("double"))
    ctx.apply(edit)
    return len(values)


def _projected_run(path: Path) -> tuple[cp.Graph, cp.RunResult, list[cp.Event]]:
    graph = cp.Graph("shapes")
    items = graph.add("items", _flaky_factory(), retries=2)
    doubled = graph.map("double", _double, over=items)
    graph.add("grow", _grow, values=doubled)
    store = SQLiteStore(path)
    try:
        result = cp.run_sync(graph, store=store)
        return graph, result, store.events(result.run_id)
    finally:
        store.close()


def test_projection_matches_the_run(tmp_path: Path) -> None:
    _, result, events = _projected_run(tmp_path / "runs.db")
    assert result.ok
    projection = project(result.run_id, events)
    state = projection.state
    assert projection.deps_known  # the runtime records the static nodes' dependencies
    assert state.status is cp.RunStatus.SUCCEEDED
    assert state.graph == "shapes"
    assert set(state.nodes) == set(result.state.nodes)  # incl. map children and the edit
    assert projection.declared == len(result.state.nodes)
    for node, live in result.state.nodes.items():
        seen = state.nodes[node]
        assert (seen.status, seen.attempt, seen.error) == (live.status, live.attempt,
                                                           live.error), node
        assert seen.run_time == pytest.approx(live.run_time), node
        assert seen.value == live.value, node
    assert state.nodes[cp.NodeId("items")].attempt == 2
    assert state.nodes[cp.NodeId("double")].spec.deps == ("double[0]", "double[1]", "double[2]")
    assert state.nodes[cp.NodeId("extra")].spec.deps == ("double",)


def test_projection_uses_recorded_deps_for_the_critical_path(tmp_path: Path) -> None:
    graph, result, events = _projected_run(tmp_path / "runs.db")
    created = events[0]
    assert created.data is not None
    assert created.data["deps"] == {k: list(v.deps) for k, v in graph.nodes.items()}
    projection = project(result.run_id, events)
    assert projection.deps_known
    live = result.metrics
    # the live run's state knows which node's edit added 'extra'; the log says it too
    seen = compute(projection.state, projection.state.finished_at or 0.0, projection.spawned)
    assert seen.critical_path_nodes == live.critical_path_nodes
    assert seen.critical_path == pytest.approx(live.critical_path)
    assert seen.makespan == pytest.approx(live.makespan)


def test_live_view_lists_the_nodes_running_now_from_the_events() -> None:
    """The running rows come from the nodes the events said started (not a pass over every
    node of the run at each redraw), less those that ended since."""
    from counterpoint.events import Event, EventKind
    from counterpoint.state import RunState
    from counterpoint.transitions import evolve

    async def step() -> int:
        return 1

    g = cp.Graph("live")
    for name in ("a", "b", "c"):
        g.add(name, step)
    state = RunState.new(cp.RunId("r"), g.name, g.nodes.values())
    tally = Tally()
    tally.reused(state)
    events = [Event(EventKind.RUN_CREATED, 1.0),
              Event(EventKind.NODE_STARTED, 1.0, cp.NodeId("c"), 1),
              Event(EventKind.NODE_STARTED, 1.1, cp.NodeId("a"), 1),
              Event(EventKind.NODE_SUCCEEDED, 1.2, cp.NodeId("c"), 1, value="1", output=1)]
    for event in events:
        evolve(state, event)
        tally.note(event, state)
    assert [ns.spec.id for ns in tally.active(state)] == ["a"]
    console = Console(force_terminal=True, width=100, record=True, markup=False)
    console.print(render_live(state, tally, 1.0, 1.3))
    text = console.export_text()
    assert re.search(r"\ba\s+running", text) and not re.search(r"\bc\s+running", text)
    resumed = Tally()  # a view that begins mid-run takes in what runs already
    resumed.reused(state)
    assert [ns.spec.id for ns in resumed.active(state)] == ["a"]


def test_live_view_renders_a_run(tmp_path: Path) -> None:
    _, result, _ = _projected_run(tmp_path / "runs.db")
    tally = Tally()
    tally.done.update(n for n, ns in result.state.nodes.items() if ns.status.terminal)
    console = Console(force_terminal=True, width=100, record=True, markup=False)
    console.print(render_live(result.state, tally, result.state.created_at,
                              result.state.finished_at or 0.0))
    text = console.export_text()
    assert f"{len(result.state.nodes)}/{len(result.state.nodes)} nodes" in text
    assert result.run_id in text
