"""``counterpoint fork``, driven as a user drives it: real subprocesses in a working
directory of their own, a graph file, and the store they share."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

RUN_ID = re.compile(r"r-\d{8}-\d{6}-[0-9a-f]+")

FLOW = """
import os
from counterpoint import Graph


def _note(name: str) -> None:
    with open("executions.log", "a") as out:
        out.write(name + "\\n")


def fetch() -> list[int]:
    _note("fetch")
    return [1, 2, 3]


def other() -> int:
    _note("other")
    return 100


def total(xs: list[int], extra: int) -> int:
    _note("total")
    return sum(xs) + extra


def report(n: int) -> str:
    _note("report")
    return f"total {n}"


def doubled() -> list[int]:
    _note("doubled")
    return [2, 4, 6]


graph = Graph("flow")
graph.add("report", report, n=graph.add("total", total, xs=graph.add("fetch", fetch),
                                        extra=graph.add("other", other)))
"""


class Workdir:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.db = str(path / "runs.db")
        (path / "flow.py").write_text(textwrap.dedent(FLOW))

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k not in ("COUNTERPOINT_DB", "COLUMNS")}
        return subprocess.run([sys.executable, "-m", "counterpoint.cli", *args, "--db", self.db],
                              cwd=self.path, env={**env, "NO_COLOR": "1"}, capture_output=True,
                              text=True, timeout=120)

    def executions(self) -> list[str]:
        log = self.path / "executions.log"
        found = log.read_text().split() if log.exists() else []
        log.unlink(missing_ok=True)
        return found

    def json(self, *args: str) -> dict[str, Any]:
        done = self.cli(*args, "--json")
        assert done.returncode == 0, done.stderr
        data: dict[str, Any] = json.loads(done.stdout)
        return data


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> tuple[Workdir, str]:
    """A working directory with one finished run of FLOW in its store."""
    work = Workdir(tmp_path_factory.mktemp("fork"))
    data = work.json("run", "flow.py", "--quiet")
    assert data["status"] == "succeeded" and data["outputs"]["report"] == "total 106"
    work.executions()
    return work, data["run_id"]


def test_fork_at_a_node_with_a_replaced_step_reuses_the_rest(work: tuple[Workdir, str]) -> None:
    wd, parent = work
    done = wd.cli("fork", parent, "--at", "total", "--replace", "fetch=flow.py:doubled")
    assert done.returncode == 0, done.stderr
    assert f"forked from {parent} at node 'total'" in done.stdout
    assert '"report": "total 112"' in done.stdout
    assert "1 node output(s) reused" in done.stdout
    assert "[4/4] report succeeded" in done.stdout  # the reused node counts as done
    assert sorted(wd.executions()) == ["doubled", "report", "total"]
    fork = RUN_ID.findall(done.stdout)[0]
    shown = wd.json("show", fork)
    assert shown["forked_from"] == {"run": parent, "seq": shown["forked_from"]["seq"],
                                    "node": "total"}
    assert {k for k, n in shown["nodes"].items() if n["reused"]} == {"other"}
    assert shown["nodes"]["other"]["status"] == "succeeded"
    text = wd.cli("show", fork).stdout
    assert re.search(r"other\s+reused", text), text
    assert fork in wd.json("show", parent)["forks"]
    assert f"forks: {fork}" in wd.cli("show", parent).stdout


def test_fork_with_a_value_and_of_a_fork(work: tuple[Workdir, str]) -> None:
    wd, parent = work
    first = wd.json("fork", parent, "--replace", "other=value:1", "--quiet")
    assert first["outputs"]["report"] == "total 7"
    assert sorted(wd.executions()) == ["report", "total"]
    second = wd.json("fork", first["run_id"], "--at", "report", "--quiet")
    assert second["outputs"] == first["outputs"]
    assert wd.executions() == ["report"]
    assert second["forked_from"]["run"] == first["run_id"]
    assert wd.json("show", first["run_id"])["forks"] == [second["run_id"]]


def test_fork_takes_last_and_a_prefix_as_show_does(work: tuple[Workdir, str]) -> None:
    """``fork last`` and ``fork START-OF-ID`` name a run as ``show`` and ``trace`` do."""
    wd, parent = work
    first = wd.json("fork", parent[:-4], "--at", "report", "--quiet")
    assert first["forked_from"]["run"] == parent
    second = wd.json("fork", "last", "--at", "report", "--quiet")
    assert second["forked_from"]["run"] == first["run_id"]
    assert wd.executions() == ["report", "report"]


@pytest.mark.parametrize(("args", "message"), [
    (["r-20260101-000000-000000000000"], "run r-20260101-000000-000000000000 not found"),
    (["{parent}", "--at", "999"], "--at 999 is out of range: the run has events 1.."),
    (["{parent}", "--at", "nowhere"], "--at names node 'nowhere', which the run does not have"),
    (["{parent}", "--replace", "fetch=flow.py:missing"], "flow.py has no function 'missing'"),
    (["{parent}", "--replace", "fetch=nosuchmodule:f"], "cannot import nosuchmodule"),
    (["{parent}", "--replace", "fetch=value:{oops"], "not JSON after 'value:'"),
    (["{parent}", "--replace", "fetch=flow.py:report"], "cannot replace node 'fetch'"),
    (["{parent}", "--input", "city=Paris"], "has no input(s) ['city']"),
])
def test_misuse_is_one_error_line_and_exit_code_2(work: tuple[Workdir, str], args: list[str],
                                                  message: str) -> None:
    wd, parent = work
    done = wd.cli("fork", *[parent if a == "{parent}" else a for a in args])
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], lines
    assert "Traceback" not in done.stderr
    assert wd.executions() == []


def test_a_workflow_input_is_converted_to_its_declared_type(tmp_path: Path) -> None:
    wd = Workdir(tmp_path)
    grade = str(Path(__file__).resolve().parents[2] / "examples" / "workflows" / "grade.yaml")
    parent = wd.json("run", grade, "--input", "score=72", "--quiet")
    assert parent["outputs"]["report"] == "72: passed, well done"
    fork = wd.json("fork", parent["run_id"], "--input", "score=30", "--quiet")
    assert fork["outputs"]["report"] == "30: not yet, revise chapter 3"
    assert fork["nodes"]["passed"]["status"] == "skipped"
    bad = wd.cli("fork", parent["run_id"], "--input", "score=abc")
    assert bad.returncode == 2 and "input 'score' expects a whole number" in bad.stderr


def test_show_of_a_fork_tells_reused_calls_from_those_sent(tmp_path: Path) -> None:
    """In process: a fork's log alone (what ``show`` reads) marks its reused nodes and
    model calls, and the share of calls that came from the log."""
    from rich.console import Console

    import counterpoint as cp
    from counterpoint.cli.calls import calls_table
    from counterpoint.cli.recorded import log_report
    from counterpoint.cli.render import summary
    from counterpoint.events import EventKind

    model = cp.Model(cp.ScriptedModel(["Lisbon", "Porto"], name="show-fork"))

    async def ask(country: str) -> str:
        return (await model.generate(f"A city in {country}?")).text

    def pair(a: str, b: str) -> str:
        return f"{a} and {b}"

    graph = cp.Graph("cities")
    graph.add("pair", pair, a=graph.add("one", ask, country="Portugal"),
              b=graph.add("two", ask, country="Portugal, not Lisbon"))
    store = cp.SQLiteStore(tmp_path / "runs.db")
    try:
        parent = cp.run_sync(graph, store=store)
        fork = cp.fork_sync(parent.run_id, at="one", graph=graph, store=store)
        events = store.events(fork.run_id)
        report = log_report(store.run(fork.run_id), events, store.forks(fork.run_id))
        parent_report = log_report(store.run(parent.run_id), store.events(parent.run_id),
                                   store.forks(parent.run_id))
    finally:
        store.close()
    console = Console(width=160, record=True, markup=False)
    console.print(summary(report, inspect=None))
    console.print(calls_table([e for e in events if e.kind is EventKind.MODEL_CALL]))
    console.print(summary(parent_report, inspect=None))
    text = console.export_text()
    assert f"forked from {parent.run_id} at node 'one'" in text
    assert re.search(r"two\s+reused", text) and re.search(r"one\s+succeeded", text)
    assert "0 calls, 1 reused from the parent run, 1 from cache, 100% from the log" in text
    assert f"reused from {parent.run_id}" in text and "from cache" in text
    assert f"forks: {fork.run_id}" in text


def test_show_of_a_fork_whose_parent_was_deleted_says_so(tmp_path: Path) -> None:
    """The fork's lineage still names its parent (the index keeps it), and ``show`` says
    the parent is gone rather than pointing at a run it cannot show."""
    wd = Workdir(tmp_path)
    parent = wd.json("run", "flow.py", "--quiet")["run_id"]
    fork = wd.json("fork", parent, "--at", "report", "--quiet")["run_id"]
    deleted = wd.cli("delete", parent)
    assert deleted.returncode == 0, deleted.stderr
    text = wd.cli("show", fork)
    assert text.returncode == 0, text.stderr
    assert f"forked from {parent} at node 'report' (seq " in text.stdout
    assert "(since deleted from the store; this fork's own log is whole)" in \
        " ".join(text.stdout.split())
    shown = wd.json("show", fork)
    assert shown["forked_from"]["run"] == parent and shown["forked_from"]["deleted"] is True
    gone = wd.cli("show", parent)
    assert gone.returncode == 2 and "not found" in gone.stderr
