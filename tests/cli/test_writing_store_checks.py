"""Every command that writes to an existing store refuses, before it writes anything, one
no run could be recorded in (cli/stores.py ``check_writable``, as ``run`` does): a
read-only file, a directory, a device. One ``error: store PATH: ...`` line, exit 2, no
traceback, the file unchanged. The commands that only read (``runs``, ``show``,
``approvals``, ``prune --dry-run``, ``resume`` or ``cancel`` of a finished run) still
read a read-only store.

Regression: ``resume`` of an interrupted run went as far as starting it and then said
"run ... stopped, its log whole up to the failure: fix the cause (e.g. free disk
space)"; ``mcp`` served a store it could record no run in (exit 0)."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest
from store.helpers import CLI_MAIN, unprivileged
from support import run_cli

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")

FLOWS = """
import os
from pathlib import Path
import counterpoint as cp

ok = cp.Graph("ok")
ok.add("a", lambda: 1)

dies = cp.Graph("dies")
def boom() -> int:
    os._exit(9)  # the process dies in the middle of the run: it stays resumable
dies.add("b", boom)

release = cp.Graph("release")
async def deploy(ctx: cp.NodeContext) -> str:
    answer = await ctx.ask("deploy?", {"v": 1})
    return "deployed" if answer.approved else "held"
release.add("deploy", deploy)
"""



class Store:
    """A store with a finished run, an interrupted one and one waiting for an approval."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / "runs.db"
        (folder / "flows.py").write_text(FLOWS)
        ids = []
        for graph, code in (("ok", 0), ("dies", 9), ("release", 3)):
            done = run_cli("run", f"flows.py:{graph}", "--db", "runs.db", "-q",
                           "--no-preflight", "--detach-waiting", cwd=folder)
            assert done.returncode == code, done.stdout + done.stderr
        listed = run_cli("runs", "--db", "runs.db", cwd=folder)
        ids = {line.split()[1]: line.split()[0] for line in listed.stdout.splitlines()[1:]}
        self.finished, self.interrupted = ids["ok"], ids["dies"]
        asked = run_cli("approvals", "--db", "runs.db", cwd=folder)
        self.approval = asked.stdout.splitlines()[1].split()[0]

    def digest(self) -> str:
        return hashlib.sha256(self.path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    return Store(tmp_path_factory.mktemp("writing"))


def _writing(store: Store, db: str) -> dict[str, list[str]]:
    return {
        "resume": ["resume", store.interrupted, "--db", db, "-q"],
        "approve": ["approve", store.approval, "--db", db, "-q"],
        "approve --no-resume": ["approve", store.approval, "--db", db, "--no-resume"],
        "reject": ["reject", store.approval, "--reason", "no", "--db", db],
        "reject --no-resume": ["reject", store.approval, "--reason", "no", "--db", db,
                               "--no-resume"],
        "fork": ["fork", store.finished, "--db", db, "-q"],
        "cancel": ["cancel", store.interrupted, "--db", db],
        "delete": ["delete", store.finished, "--db", db],
        "prune": ["prune", "--keep", "0", "--db", db],
        "mcp": ["mcp", "--db", db],
    }


WRITING = ["resume", "approve", "approve --no-resume", "reject", "reject --no-resume", "fork",
           "cancel", "delete", "prune", "mcp"]


@pytest.mark.parametrize("command", WRITING)
def test_a_read_only_store_is_refused_before_anything_is_written(
        store: Store, command: str) -> None:
    before = store.digest()
    store.path.chmod(0o444)
    try:
        done = unprivileged(CLI_MAIN, *_writing(store, str(store.path))[command])
    finally:
        store.path.chmod(0o644)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr == (f"error: store {store.path}: {store.path} is read-only; make it "
                           "writable (chmod u+w) or point --db / COUNTERPOINT_DB "
                           "elsewhere\n"), done.stderr
    assert store.digest() == before


@pytest.mark.parametrize("command", WRITING)
@pytest.mark.parametrize(("db", "problem"), [
    ("folder", "is a directory; pass the path of a file in it"),
    ("/dev/null", "/dev/null is not a regular file (a device, a pipe or a socket)")])
def test_a_folder_or_a_device_is_refused(store: Store, command: str, db: str,
                                         problem: str) -> None:
    where = str(store.path.parent) if db == "folder" else db
    done = run_cli(*_writing(store, where)[command], cwd=store.path.parent)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith(f"error: store {where}: ") and problem in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) == 1


@pytest.mark.parametrize("args", [["runs"], ["show", "{finished}"], ["approvals"],
                                  ["prune", "--keep", "0", "--dry-run"],
                                  ["resume", "{finished}"], ["cancel", "{finished}"],
                                  ["show", "{finished}", "--json"]])
def test_reading_commands_still_read_a_read_only_store(store: Store, args: list[str]) -> None:
    before = store.digest()
    store.path.chmod(0o444)
    try:
        done = unprivileged(CLI_MAIN, *[a.format(finished=store.finished) for a in args],
                            "--db", str(store.path))
    finally:
        store.path.chmod(0o644)
    assert done.returncode == 0, done.stdout + done.stderr
    if "--json" in args:
        assert json.loads(done.stdout)["run_id"] == store.finished
    else:
        assert store.finished in done.stdout or "would delete" in done.stdout \
            or "ap-" in done.stdout
    assert store.digest() == before
