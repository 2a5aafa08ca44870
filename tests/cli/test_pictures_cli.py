"""``counterpoint graph`` and ``trace``, run ids by prefix and ``last``, ``runs`` at 80
columns, where a node failed, and ``show --calls --full``: driven as a user drives them,
as subprocesses with their own working directory and store."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SVG = "{http://www.w3.org/2000/svg}"
RUN_ID = re.compile(r"r-\d{8}-\d{6}-[0-9a-f]+")

OK = """
from counterpoint import Graph

graph = Graph("a graph with a rather long name that has to fold at eighty columns")

def fetch() -> list[int]:
    return [1, 2, 3]

def total(xs: list[int]) -> int:
    return sum(xs)

graph.add("total", total, xs=graph.add("fetch", fetch))
"""

BROKEN = """
from counterpoint import Graph

graph = Graph("broken")
calls = {"n": 0}

def first() -> int:
    return 1

def flaky(x: int) -> int:
    calls["n"] += 1
    if calls["n"] == 1:
        raise ConnectionError("transient")  # FLAKY LINE
    return x

def explode(x: int) -> int:
    raise ValueError(f"cannot explode {x}")  # EXPLODE LINE

graph.add("explode", explode, x=graph.add("flaky", flaky, x=graph.add("first", first),
                                          retries=2), retries=1)
"""

TALK = """
import os
import counterpoint as cp

scripted = cp.ScriptedModel(["the first answer", "the second answer"])
model = cp.Model(scripted)
graph = cp.Graph("talk")

async def ask(question: str) -> str:
    return (await model.generate(question, system="be brief")).text

graph.add("one", ask, question="which city? key " + os.environ["PICTURES_API_KEY"])
graph.add("two", ask, question="which river?", after=["one"])
"""
SECRET = "sk-pictures-0123456789abcdef"


class Work:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.db = str(path / "runs.db")

    def write(self, name: str, source: str) -> None:
        (self.path / name).write_text(textwrap.dedent(source))

    def cli(self, *args: str, db: bool = True, columns: int | None = None
            ) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items()
               if k not in ("COUNTERPOINT_DB", "FORCE_COLOR", "COLUMNS")}
        env.update(NO_COLOR="1", PICTURES_API_KEY=SECRET)
        if columns is not None:
            env["COLUMNS"] = str(columns)
        return subprocess.run([sys.executable, "-m", "counterpoint.cli", *args,
                               *(("--db", self.db) if db else ())], cwd=self.path, env=env,
                              capture_output=True, text=True, timeout=120)

    def run(self, name: str) -> str:
        done = self.cli("run", name, "--quiet", "--json")
        return str(json.loads(done.stdout)["run_id"])


@pytest.fixture
def work(tmp_path: Path) -> Work:
    return Work(tmp_path)


def _misuse(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert "Traceback" not in done.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])


# ------------------------------------------------------------------ graph
def test_graph_prints_mermaid_and_writes_dot_and_svg(work: Work) -> None:
    work.write("ok.py", OK)
    mermaid = work.cli("graph", "ok.py", db=False)
    assert mermaid.returncode == 0, mermaid.stderr
    assert mermaid.stdout.splitlines()[3] == "flowchart TD"
    assert re.search(r'n\d\["fetch"\]', mermaid.stdout) and 'n0 -->|"xs"| n1' in mermaid.stdout
    dot = work.cli("graph", "ok.py:graph", "-o", "g.dot", db=False)
    assert dot.returncode == 0 and "wrote g.dot" in dot.stderr
    text = (work.path / "g.dot").read_text()
    assert text.startswith('digraph "a graph with') and "n0 -> n1" in text
    if shutil.which("dot"):
        assert subprocess.run(["dot", "-Tsvg", str(work.path / "g.dot")], capture_output=True,
                              timeout=60).returncode == 0
    assert work.cli("graph", "ok.py", "--out", "g.svg", db=False).returncode == 0
    root = ET.parse(work.path / "g.svg").getroot()
    assert {t.text for t in root.iter(f"{SVG}text") if t.get("class") == "label"} == \
        {"fetch", "total"}
    piped = work.cli("graph", "ok.py", "--format", "svg", db=False)
    assert ET.fromstring(piped.stdout).tag == f"{SVG}svg"
    assert work.cli("graph", "ok.py", "-o", "g.md", db=False).returncode == 0
    assert (work.path / "g.md").read_text().startswith("```mermaid\n---\n")


def test_graph_draws_a_workflow_file(work: Work) -> None:
    done = work.cli("graph", str(ROOT / "examples" / "workflows" / "grade.yaml"), db=False)
    assert done.returncode == 0, done.stderr
    assert '{"passed.when' in done.stdout and '{"comment.pick' in done.stdout


def test_graph_misuse_is_one_line_and_exit_code_2(work: Work) -> None:
    work.write("ok.py", OK)
    _misuse(work.cli("graph", "ok.py", "-o", "g.png", db=False), "g.png", ".svg")
    _misuse(work.cli("graph", "ok.py", "--format", "png", db=False), "mermaid, dot or svg")
    _misuse(work.cli("graph", "missing.py", db=False), "missing.py")
    _misuse(work.cli("graph", "ok.py:nothing", db=False), "nothing")
    _misuse(work.cli("graph", "plan a trip to Lisbon", db=False), "not a graph file")


def test_an_output_in_a_folder_that_does_not_exist_says_so(work: Work) -> None:
    """Regression: ``cannot write pics/g.svg: No such file or directory``, which did not
    say that the folder was what was missing (and it is not made: a misspelt one)."""
    work.write("ok.py", OK)
    done = work.cli("graph", "ok.py", "-o", "pics/g.svg", db=False)
    _misuse(done)
    assert done.stderr == ("error: cannot write pics/g.svg: its folder pics does not exist; "
                           "create it first (mkdir -p pics), or correct the path\n")
    (work.path / "g.svg").mkdir()
    done = work.cli("graph", "ok.py", "-o", "g.svg", db=False)
    _misuse(done)
    assert done.stderr == ("error: cannot write g.svg: it is a folder; give a file in it, "
                           "e.g. g.svg/picture.svg\n")
    assert not (work.path / "pics").exists()


# ------------------------------------------------------------------ run ids
def test_show_resume_and_cancel_take_a_unique_prefix_or_last(work: Work) -> None:
    work.write("ok.py", OK)
    first, second = work.run("ok.py"), work.run("ok.py")
    assert first != second
    last = work.cli("show", "last", "--json")
    assert last.returncode == 0 and json.loads(last.stdout)["run_id"] == second
    serial = first.rpartition("-")[2]
    other = second.rpartition("-")[2]
    common = next((i for i, (a, b) in enumerate(zip(serial, other, strict=False)) if a != b),
                  len(serial))
    assert common < len(serial) - 2, "two runs' serials are random: they differ early"
    by_serial = work.cli("show", serial[:common + 2], "--json")
    assert json.loads(by_serial.stdout)["run_id"] == first
    by_start = work.cli("show", first[:-3], "--json")
    assert by_start.returncode == 0 and json.loads(by_start.stdout)["run_id"] == first
    ambiguous = work.cli("show", "r-")
    _misuse(ambiguous, "ambiguous", first, second)
    _misuse(work.cli("show", "zzz"), "zzz", "not found")
    cancelled = work.cli("cancel", "last")
    assert cancelled.returncode == 0 and f"run {second} already finished" in cancelled.stdout
    resumed = work.cli("resume", serial[:common + 2], "--quiet")
    assert resumed.returncode == 0 and first in resumed.stdout


def test_last_in_a_store_without_runs_says_there_is_none(work: Work) -> None:
    _misuse(work.cli("show", "last", "--db", "memory", db=False), "no last run",
            "holds no runs")
    _misuse(work.cli("trace", "last", "--out", "t.svg", "--db", "memory", db=False),
            "no last run")
    _misuse(work.cli("show", "last"), "no store at", "--db PATH")


def test_runs_keeps_every_id_whole_at_80_columns(work: Work) -> None:
    work.write("ok.py", OK)
    ids = {work.run("ok.py") for _ in range(2)}
    listing = work.cli("runs", columns=80)
    assert listing.returncode == 0, listing.stderr
    assert set(RUN_ID.findall(listing.stdout)) == ids
    for line in listing.stdout.splitlines():
        assert len(line) <= 80, line
    rows = [line for line in listing.stdout.splitlines() if RUN_ID.match(line)]
    assert len(rows) == 2 and all(RUN_ID.match(row).group(0) in ids for row in rows)  # type: ignore[union-attr]
    assert "succeeded" in rows[0]


# ------------------------------------------------------------------ failures
def _line(source: str, marker: str) -> int:
    return next(i for i, line in enumerate(textwrap.dedent(source).splitlines(), 1)
                if marker in line)


def test_show_says_where_each_failed_attempt_failed(work: Work) -> None:
    work.write("broken.py", BROKEN)
    run = work.run("broken.py")
    shown = work.cli("show", run)
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    explode = _line(BROKEN, "EXPLODE LINE")
    assert f"failed at broken.py:{explode} in explode" in out
    assert re.search(rf"attempt 1: ValueError: cannot explode 1 \(retried after [\d.]+s\) at "
                     rf"broken.py:{explode} in explode", out), out
    assert "flaky succeeded on attempt 2" in out
    assert "attempt 1: ConnectionError: transient" in out
    assert f"broken.py:{_line(BROKEN, 'FLAKY LINE')} in flaky" in out
    data = json.loads(work.cli("show", run, "--json").stdout)
    assert data["nodes"]["explode"]["error"]["location"]["line"] == explode
    flaky = data["nodes"]["flaky"]
    assert flaky["status"] == "succeeded"
    assert [(a["attempt"], a["type"], a["final"]) for a in flaky["failed_attempts"]] == \
        [(1, "ConnectionError", False)]
    assert "failed_attempts" not in data["nodes"]["first"]


# ------------------------------------------------------------------ model calls
def test_show_calls_full_prints_each_prompt_and_answer_without_secrets(work: Work) -> None:
    work.write("talk.py", TALK)
    run = work.run("talk.py")
    listed = work.cli("show", run, "--calls")
    assert listed.returncode == 0, listed.stderr
    assert "the first answer" not in listed.stdout  # the table shows no text
    full = work.cli("show", run, "--calls", "--full")
    assert full.returncode == 0, full.stderr
    out = full.stdout
    assert "which city? key ***" in out and SECRET not in out
    assert "be brief" in out and "the first answer" in out and "the second answer" in out
    assert out.index("the first answer") < out.index("which river?")
    data = json.loads(work.cli("show", run, "--calls", "--full", "--json").stdout)
    calls = data["calls"]
    assert [c["answer"]["text"] for c in calls] == ["the first answer", "the second answer"]
    assert calls[1]["prompt"]["messages"][-1] == {**calls[1]["prompt"]["messages"][-1],
                                                  "role": "user", "content": "which river?"}
    assert SECRET not in json.dumps(data)
    second = calls[1]["call"]
    one = work.cli("show", run, "--call", str(second))
    assert one.returncode == 0 and "which river?" in one.stdout
    assert "the second answer" in one.stdout and "the first answer" not in one.stdout
    _misuse(work.cli("show", run, "--call", "999"), "no model call 999")


# ------------------------------------------------------------------ trace
def test_trace_writes_a_self_contained_gantt_of_a_finished_run(work: Work) -> None:
    work.write("broken.py", BROKEN)
    run = work.run("broken.py")
    page = work.cli("trace", run[:-2], "--out", "run.html")
    assert page.returncode == 0, page.stderr
    html = (work.path / "run.html").read_text()
    assert html.startswith("<!doctype html>") and "<script" not in html
    assert html.count('class="bar run failed"') == 3  # flaky once, explode twice
    assert "critical path" in html and run in html
    assert work.cli("trace", "last", "-o", "run.svg").returncode == 0
    root = ET.parse(work.path / "run.svg").getroot()
    assert sorted(t.text or "" for t in root.iter(f"{SVG}text") if t.get("class") == "node") \
        == ["explode", "first", "flaky"]
    _misuse(work.cli("trace", run, "--out", "run.png"), "run.png", ".html or .svg")
    _misuse(work.cli("trace", "nope", "--out", "run.svg"), "nope")
