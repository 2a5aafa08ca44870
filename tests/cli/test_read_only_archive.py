"""A store in a read-only folder, as an archive or a CI artefact holds it, whose ``-wal``
still holds the last run (its process died): ``runs``, ``show`` and ``approvals`` read it,
that run included; the commands that write refuse it, one line, exit 2, every file
unchanged (:mod:`counterpoint.store.sqlite_access`, cli/stores.py)."""

from __future__ import annotations

import json
import sqlite3
import sys
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
from store.helpers import CLI_MAIN, file_digests, unprivileged, write_archive

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="POSIX permissions")

class Archive:
    """A finished run in the store file, an interrupted one only in its ``-wal``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / "runs.db"
        write_archive(folder)
        uri = f"file:{urllib.parse.quote(str(self.path))}?mode=ro&immutable=1"
        conn = sqlite3.connect(uri, uri=True)  # the file alone, as if the -wal were lost
        in_file = {r[0]: r[1] for r in conn.execute("SELECT graph, run_id FROM runs")}
        conn.close()
        assert list(in_file) == ["ok"]
        self.finished = in_file["ok"]

    def digests(self) -> dict[str, str]:
        return file_digests(self.folder)


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Archive]:
    made = Archive(tmp_path_factory.mktemp("archive"))
    yield made
    made.folder.chmod(0o755)


def _cli(*args: str) -> tuple[int, str, str]:
    done = unprivileged(CLI_MAIN, *args)
    return done.returncode, done.stdout, done.stderr


def test_runs_lists_the_run_left_in_the_wal(archive: Archive) -> None:
    code, out, err = _cli("runs", "--db", str(archive.path))
    assert code == 0, err
    rows = {line.split()[1]: line.split() for line in out.splitlines()[1:]}
    assert rows["ok"][0] == archive.finished and rows["ok"][2] == "succeeded"
    assert rows["dies"][2] == "interrupted"


def test_show_reads_the_run_left_in_the_wal(archive: Archive) -> None:
    code, out, err = _cli("runs", "--db", str(archive.path))
    dies = next(line.split()[0] for line in out.splitlines()[1:] if " dies " in line)
    code, out, err = _cli("show", dies, "--db", str(archive.path), "--json")
    assert code == 0, err
    shown = json.loads(out)
    assert shown["run_id"] == dies and "b" in json.dumps(shown["nodes"])
    code, out, err = _cli("approvals", "--db", str(archive.path))
    assert code == 0, err


@pytest.mark.parametrize("command", [["cancel", "{dies}"], ["resume", "{dies}", "-q"],
                                     ["delete", "{finished}"], ["prune", "--keep", "0"],
                                     ["fork", "{finished}", "-q"]])
def test_writing_commands_refuse_it_and_change_nothing(archive: Archive,
                                                       command: list[str]) -> None:
    _, out, _ = _cli("runs", "--db", str(archive.path))
    dies = next(line.split()[0] for line in out.splitlines()[1:] if " dies " in line)
    before = archive.digests()
    args = [a.format(dies=dies, finished=archive.finished) for a in command]
    code, out, err = _cli(*args, "--db", str(archive.path))
    assert code == 2, out + err
    assert err == (f"error: store {archive.path}: its directory {archive.folder} is not "
                   "writable, and SQLite must create runs.db-wal and runs.db-shm next to "
                   f"the file (WAL mode); make {archive.folder} writable, or copy the store "
                   "to a writable directory\n"), err
    assert archive.digests() == before
