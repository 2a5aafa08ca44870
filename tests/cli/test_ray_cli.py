"""``counterpoint run`` on Ray, driven as a user drives it (real subprocesses): ``--backend
ray`` and ``--workers N --inputs FILE.jsonl`` joined to the session's local Ray cluster
(``--ray-address``), and the misuse that exits with code 2 before anything runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support import free_port

from counterpoint.ids import RunId
from counterpoint.store import SQLiteStore

FLOW = """
import os

import counterpoint as cp


def checked(x: int) -> int:
    if x == 3:
        raise ValueError("three is not allowed")
    return x


async def where(x: int) -> list[int]:
    return [2 * x, os.getpid()]


graph = cp.Graph("doubling")
graph.output(graph.add("double", where, x=graph.add("checked", checked, x=graph.input("x"))))
"""


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "flow.py").write_text(FLOW)
    (tmp_path / "inputs.jsonl").write_text("".join(f'{{"x": {i}}}\n' for i in range(1, 8)))
    return tmp_path


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("COUNTERPOINT_DB", "FORCE_COLOR", "COLUMNS")}
    env["NO_COLOR"] = "1"
    return env


def _cli(work: Path, *args: str, env: dict[str, str] | None = None,
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "counterpoint.cli", *args], cwd=work,
                          env=env or _env(), capture_output=True, text=True, timeout=180)


def _address(ray_cluster: Any) -> str:
    address: str = ray_cluster.get_runtime_context().gcs_address
    return address


def test_backend_ray_runs_the_nodes_in_ray_workers(work: Path, ray_cluster: Any) -> None:
    done = _cli(work, "run", "flow.py", "--backend", "ray", "--ray-address",
                _address(ray_cluster), "--input", "x=4", "--db", "runs.db", "--json")
    assert done.returncode == 0, done.stderr
    assert " INFO " not in done.stderr and " WARNING " not in done.stderr, done.stderr
    result = json.loads(done.stdout)
    doubled, pid = result["outputs"]["double"]
    assert doubled == 8
    assert pid != os.getpid() and result["status"] == "succeeded"


def test_workers_run_every_line_over_shards_with_aggregate_progress(
        work: Path, ray_cluster: Any) -> None:
    done = _cli(work, "run", "flow.py", "--workers", "2", "--inputs", "inputs.jsonl",
                "--ray-address", _address(ray_cluster), "--db", "runs.db")
    assert done.returncode == 1, done.stderr  # the run of x=3 failed
    assert "runs 7/7 done · 1 failed · 0 running ·" in done.stdout, done.stdout
    assert "7 runs: 6 succeeded, 1 failed in" in done.stdout, done.stdout
    assert "line 3: run " in done.stdout, done.stdout
    shards = sorted((work / "shards").glob("shard-*.db"))
    assert [p.name for p in shards] == ["shard-0.db", "shard-1.db"], (done.stdout, done.stderr)
    statuses: list[str] = []
    for path in shards:
        store = SQLiteStore(path)
        try:
            statuses += [store.run(RunId(r.run_id)).status for r in store.runs()]
        finally:
            store.close()
    assert sorted(statuses) == ["failed"] + ["succeeded"] * 6


def test_a_failed_run_is_named_by_its_line_of_the_inputs_file(
        work: Path, ray_cluster: Any) -> None:
    (work / "gaps.jsonl").write_text('{"x": 1}\n\n{"x": 3}\n')  # blank lines are skipped
    done = _cli(work, "run", "flow.py", "--workers", "1", "--inputs", "gaps.jsonl",
                "--ray-address", _address(ray_cluster), "--db", "runs.db")
    assert done.returncode == 1, done.stderr
    assert "line 3: run " in done.stdout, done.stdout  # was "line 2", the run's position


def test_workers_json_gives_each_run_in_input_order(work: Path, ray_cluster: Any) -> None:
    done = _cli(work, "run", "flow.py", "--workers", "1", "--inputs", "inputs.jsonl",
                "--ray-address", _address(ray_cluster), "--db", "runs.db", "--json")
    summary = json.loads(done.stdout)
    assert (summary["total"], summary["succeeded"], summary["failed"]) == (7, 6, 1)
    assert [r["output"][0] if r["output"] else None for r in summary["runs"]] == [
        2, 4, None, 8, 10, 12, 14]


@pytest.mark.parametrize(("args", "message"), [
    (["--backend", "ray", "--ray-address", "127.0.0.1:{port}"],
     "cannot reach the Ray cluster at '127.0.0.1:{port}'"),
    (["--backend", "ray", "--ray-address", "nowhere"],
     "Ray address 'nowhere' is not 'auto', HOST:PORT or ray://HOST:PORT"),
    (["--ray-address", "auto"], "--ray-address needs --backend ray or --workers N"),
    (["--backend", "dask"], "--backend 'dask' is not one of inprocess, ray"),
    (["--workers", "2"], "--workers N needs --inputs FILE.jsonl"),
    (["--workers", "0", "--inputs", "inputs.jsonl"], "'--workers'"),
    (["--workers", "2", "--inputs", "bad.jsonl"], "bad.jsonl:2: not JSON"),
    (["--workers", "2", "--inputs", "list.jsonl"], "list.jsonl:1: a JSON list, not an object"),
    # a line whose inputs do not fit the graph failed in the shards: a traceback, exit 1
    (["--workers", "2", "--inputs", "unknown.jsonl"],
     "unknown.jsonl:3: {work}/flow.py: graph 'doubling' has no input(s) ['y']"),
])
def test_misuse_is_one_clear_error_and_exit_2(work: Path, args: list[str],
                                              message: str) -> None:
    (work / "bad.jsonl").write_text('{"x": 1}\n{x: 2}\n')
    (work / "list.jsonl").write_text("[1, 2]\n")
    (work / "unknown.jsonl").write_text('{"x": 1}\n\n{"y": 2}\n')
    port = str(free_port())
    done = _cli(work, "run", "flow.py", *[a.format(port=port) for a in args], "--input",
                "x=1", "--db", "runs.db")
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert message.format(port=port, work=work) in done.stderr
    assert "Traceback" not in done.stderr


def test_more_workers_than_the_cluster_has_cpus_is_refused_before_any_shard_starts(
        work: Path, ray_cluster: Any) -> None:
    # the third shard's actor (1 CPU) was never placed on the 2-CPU cluster: a silent hang
    done = _cli(work, "run", "flow.py", "--workers", "3", "--inputs", "inputs.jsonl",
                "--ray-address", _address(ray_cluster), "--db", "runs.db")
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "3 shards need a CPU each, and the Ray cluster has 2" in done.stderr
    assert "Use --workers 2" in done.stderr and "Traceback" not in done.stderr
    assert not (work / "shards").exists()


def test_workers_with_a_database_url_is_refused_without_printing_its_password(
        work: Path) -> None:
    done = _cli(work, "run", "flow.py", "--workers", "2", "--inputs", "inputs.jsonl",
                "--db", "postgresql://app:s3cret@127.0.0.1:5432/runs")
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "--workers needs --db to be a SQLite file" in done.stderr
    assert "app:***@127.0.0.1" in done.stderr
    assert "s3cret" not in done.stdout + done.stderr  # it was printed in the message


@pytest.mark.parametrize("args", [["--backend", "ray"], ["--workers", "2", "--inputs",
                                                          "inputs.jsonl"]])
def test_without_ray_installed_the_error_says_how_to_install_it(
        work: Path, tmp_path_factory: pytest.TempPathFactory, args: list[str]) -> None:
    # a deliberate test double: a `ray` package first on the path that fails to import, as
    # a missing Ray does
    shadow = tmp_path_factory.mktemp("no-ray")
    (shadow / "ray").mkdir()
    (shadow / "ray" / "__init__.py").write_text(
        "raise ImportError(\"No module named 'ray' (hidden by the test)\")\n")
    env = {**_env(),
           "PYTHONPATH": os.pathsep.join([str(shadow), os.environ.get("PYTHONPATH", "")])}
    done = _cli(work, "run", "flow.py", *args, "--input", "x=1", "--db", "runs.db", env=env)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "error: the Ray backend needs Ray: pip install 'counterpoint[ray]'" in done.stderr
    assert "Traceback" not in done.stderr


SLOW = """
from pathlib import Path

import counterpoint as cp

HERE = Path(__file__).parent


def step(node: str, previous: int = 0) -> int:
    with (HERE / "side.txt").open("a") as side:
        side.write(node + "\\n")
    if node == "b" and not (HERE / "resumed").exists():
        import time
        time.sleep(300)  # the first run's workload: the test kills the CLI meanwhile
    return previous + 1


graph = cp.Graph("slow-chain")
graph.output(graph.add("c", step, node="c", previous=graph.add(
    "b", step, node="b", previous=graph.add("a", step, node="a"))))
"""


def test_a_killed_run_on_ray_resumes_on_ray_from_the_command_line(
        tmp_path: Path, ray_cluster: Any) -> None:
    import signal

    from support import wait_until

    from counterpoint.events import EventKind
    (tmp_path / "slow.py").write_text(SLOW)
    db = tmp_path / "runs.db"
    first = subprocess.Popen(
        [sys.executable, "-m", "counterpoint.cli", "run", "slow.py", "--backend", "ray",
         "--ray-address", _address(ray_cluster), "--db", str(db), "--quiet"],
        cwd=tmp_path, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def started_b() -> str | None:
        if not db.exists():
            return None
        store = SQLiteStore(db)
        try:
            for record in store.runs():
                kinds = [(e.kind, e.node) for e in store.events(RunId(record.run_id))]
                if (EventKind.NODE_STARTED, "b") in kinds:
                    return str(record.run_id)
        except Exception:
            return None  # the store is being created
        finally:
            store.close()
        return None

    try:
        run_id = wait_until(started_b, "the log to show node b started", timeout=120)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    (tmp_path / "resumed").touch()
    done = _cli(tmp_path, "resume", run_id, "--backend", "ray", "--ray-address",
                _address(ray_cluster), "--db", str(db), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["outputs"]["c"] == 3
    assert (tmp_path / "side.txt").read_text().split() == ["a", "b", "b", "c"]  # a once


@pytest.mark.parametrize(("args", "message"), [
    (["--ray-address", "auto"], "--ray-address needs --backend ray or --workers N"),
    (["--backend", "dask"], "--backend 'dask' is not one of inprocess, ray"),
])
def test_resume_refuses_backend_misuse_even_of_a_finished_run(work: Path, args: list[str],
                                                              message: str) -> None:
    done = _cli(work, "run", "flow.py", "--input", "x=1", "--db", "runs.db", "--quiet")
    assert done.returncode == 0, done.stderr  # finished: nothing is left to resume
    again = _cli(work, "resume", "last", *args, "--db", "runs.db")
    assert again.returncode == 2, (again.stdout, again.stderr)
    assert message in again.stderr and "Traceback" not in again.stderr
