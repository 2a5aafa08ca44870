"""A store nobody can write to is read (:mod:`counterpoint.store.sqlite_access`): in a
read-only folder, on a read-only mount, an immutable file; with its latest commits still
in its ``-wal`` too, and refused, saying how to read a copy, when they cannot be read."""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

import counterpoint as cp
from counterpoint.events import EventKind
from counterpoint.store import SQLiteStore

from .helpers import RUN, created, finished, node_event, python, unprivileged

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Linux permissions, mounts")

OLD = "r-old"

_READ = """
import os, sys
import counterpoint as cp
from counterpoint.events import Event, EventKind
from counterpoint.store import SQLiteStore
try:
    store = SQLiteStore(sys.argv[1])
    runs = {r.run_id: (str(r.status), len(store.events(r.run_id))) for r in store.runs()}
    print("read", sorted(runs.items()), store.read_only, flush=True)
    if len(sys.argv) > 2:
        store.append("r-new", Event(EventKind.RUN_CREATED, 0.0, data={"graph": "g"}, seq=1))
        store.flush_sync()
        print("wrote", flush=True)
    store.close()
except cp.StoreError as exc:
    print(type(exc).__name__, exc)
"""

_LEFT_IN_THE_WAL = """
import os, sys
sys.path.insert(0, sys.argv[2])
from store.helpers import RUN, created, finished, node_event
from counterpoint.store import SQLiteStore
store = SQLiteStore(sys.argv[1])
store.append_many(RUN, [created(), node_event(2), finished(3)])
store.flush_sync()
# as a machine that lost power: this process and its store's writer process die at once,
# so nothing checkpoints and the -wal keeps the run (the writer, left alive, would commit
# and close its connection, the last one, which checkpoints it into the file)
import signal
for pid in os.listdir("/proc"):
    try:
        with open(f"/proc/{pid}/stat") as stat:
            parent = int(stat.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        continue
    if parent == os.getpid():
        os.kill(int(pid), signal.SIGKILL)
os._exit(0)
"""


def _with_the_last_run_in_its_wal(path: Path) -> None:
    """A store holding run ``OLD`` in its file and run ``RUN`` (3 events) only in its
    ``-wal``, as a process killed after the commit leaves it."""
    store = SQLiteStore(path)
    store.append_many(OLD, [created(), finished(2)])
    store.close()  # the last connection: checkpointed, the -wal removed
    done = subprocess.run([sys.executable, "-c", _LEFT_IN_THE_WAL, str(path),
                           str(Path(__file__).parents[1])], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert os.path.getsize(f"{path}-wal") > 32
    assert _runs_in_the_file_alone(path) == [OLD]  # so only the -wal has RUN


def _runs_in_the_file_alone(path: Path) -> list[str]:
    uri = f"file:{urllib.parse.quote(str(path))}?mode=ro&immutable=1"
    conn = sqlite3.connect(uri, uri=True)
    try:
        return [r[0] for r in conn.execute("SELECT run_id FROM runs ORDER BY run_id")]
    finally:
        conn.close()


def _clean(path: Path) -> None:
    store = SQLiteStore(path)
    store.append_many(RUN, [created(), node_event(2), finished(3)])
    store.close()
    assert not Path(f"{path}-wal").exists()


BOTH = f"read [('{OLD}', ('succeeded', 2)), ('{RUN}', ('succeeded', 3))] True"


@contextlib.contextmanager
def _read_only_folder(folder: Path) -> Iterator[None]:
    folder.chmod(0o555)
    try:
        yield
    finally:
        folder.chmod(0o755)


def _read(path: Path, *args: str) -> list[str]:
    done = unprivileged(_READ, str(path), *args)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_a_clean_store_in_a_read_only_folder_is_read_and_refused_for_writing(
        tmp_path: Path) -> None:
    folder = tmp_path / "archive"
    folder.mkdir()
    path = folder / "runs.db"
    _clean(path)
    with _read_only_folder(folder):
        lines = _read(path, "write")
    assert lines[0] == f"read [('{RUN}', ('succeeded', 3))] True"
    assert lines[1].startswith(f"StoreError store {path}: its directory {folder} is not "
                               "writable, and SQLite must create runs.db-wal"), lines
    assert sorted(p.name for p in folder.iterdir()) == ["runs.db"]


@pytest.mark.parametrize("side_mode", [0o644, 0o444])
def test_a_read_only_folder_whose_wal_holds_the_last_run(tmp_path: Path,
                                                         side_mode: int) -> None:
    """Its -wal and -shm exist: SQLite reads the -wal through them. Writable ones (as a
    writer allowed the folder leaves them) let this process write too."""
    folder = tmp_path / "archive"
    folder.mkdir()
    path = folder / "runs.db"
    _with_the_last_run_in_its_wal(path)
    for side in ("-wal", "-shm"):
        Path(f"{path}{side}").chmod(side_mode)
    with _read_only_folder(folder):
        lines = _read(path, "write")
    if side_mode == 0o644:
        assert lines == [BOTH.removesuffix("True") + "False", "wrote"]
        return
    assert lines[0] == BOTH
    assert lines[1].startswith(f"StoreError store {path}: its directory {folder} is not "
                               "writable, and SQLite must create"), lines
    assert _runs_in_the_file_alone(path) == [OLD]  # nothing was checkpointed into it


def test_a_wal_without_its_shm_in_a_read_only_folder_is_refused_and_its_copy_read(
        tmp_path: Path) -> None:
    folder = tmp_path / "archive"
    folder.mkdir()
    path = folder / "runs.db"
    _with_the_last_run_in_its_wal(path)
    Path(f"{path}-shm").unlink()  # an archive of the file and its -wal only
    with _read_only_folder(folder):
        lines = _read(path)
    assert lines == [
        f"StoreError store {path}: its runs.db-wal holds commits not yet in runs.db, which "
        f"SQLite reads only through runs.db-shm, missing, and {folder} is not writable so "
        f"it cannot be created; copy runs.db and runs.db-wal together to a writable "
        f"directory and read the copy (--db COPY), or make {folder} writable"]
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("runs.db", "runs.db-wal"):
        shutil.copy(folder / name, copy / name)
    assert _read(copy / "runs.db") == [BOTH.removesuffix("True") + "False"]


_WATCH = """
import sys
from counterpoint.store import SQLiteStore
store = SQLiteStore(sys.argv[1])
for line in sys.stdin:
    print(sorted(r.run_id for r in store.runs()), store.read_only, flush=True)
store.close()
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs a writer allowed what the reader "
                                              "is not: root, and a reader without DAC")
def test_a_reader_of_a_read_only_folder_sees_a_writer_that_starts_later(
        tmp_path: Path) -> None:
    """Read as immutable while nothing wrote it, then through the -wal a writer made."""
    from .helpers import _WITHOUT_DAC
    folder = tmp_path / "shared"
    folder.mkdir()
    path = folder / "runs.db"
    _clean(path)
    path.chmod(0o444)  # the reader may not write it (root's writer may: its capabilities)
    with _read_only_folder(folder):
        reader = python(_WITHOUT_DAC + _WATCH, str(path))
        assert reader.stdin is not None and reader.stdout is not None
        try:
            reader.stdin.write("\n")
            reader.stdin.flush()
            assert reader.stdout.readline() == f"['{RUN}'] True\n"
            writer = SQLiteStore(path)  # root: allowed to write the folder
            writer.append_many(OLD, [created(), finished(2)])
            writer.flush_sync()
            reader.stdin.write("\n")
            reader.stdin.flush()
            assert reader.stdout.readline() == f"['{OLD}', '{RUN}'] True\n"
            writer.close()
            reader.stdin.write("\n")
            reader.stdin.flush()
            assert reader.stdout.readline() == f"['{OLD}', '{RUN}'] True\n"
        finally:
            _, err = reader.communicate(timeout=60)
    assert reader.returncode == 0, err


def _root_may(*command: str) -> bool:
    if os.geteuid() != 0 or shutil.which(command[0]) is None:
        return False
    return subprocess.run(command, capture_output=True).returncode == 0


@contextlib.contextmanager
def _mounted_read_only(folder: Path, mount: Path) -> Iterator[Path]:
    mount.mkdir()
    if not _root_may("mount", "--bind", str(folder), str(mount)):
        pytest.skip("needs root with CAP_SYS_ADMIN (a read-only bind mount)")
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(mount)], check=True)
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


@pytest.mark.parametrize("left", ["clean", "wal and shm", "wal alone"])
def test_a_store_on_a_read_only_mount(tmp_path: Path, left: str) -> None:
    folder = tmp_path / "disk"
    folder.mkdir()
    if left == "clean":
        _clean(folder / "runs.db")
    else:
        _with_the_last_run_in_its_wal(folder / "runs.db")
    if left == "wal alone":
        (folder / "runs.db-shm").unlink()
    with _mounted_read_only(folder, tmp_path / "mounted") as mount:
        path = mount / "runs.db"
        lines = _read(path, "write")
        names = sorted(p.name for p in mount.iterdir())
    if left == "wal alone":
        assert lines[0].startswith(f"StoreError store {path}: its runs.db-wal holds commits "
                                   "not yet in runs.db"), lines
        assert lines[0].endswith(f"{mount} is on a read-only file system so it cannot be "
                                 "created; copy runs.db and runs.db-wal together to a "
                                 "writable directory and read the copy (--db COPY), or "
                                 "mount it read-write"), lines
        return
    assert lines[0] == (f"read [('{RUN}', ('succeeded', 3))] True" if left == "clean"
                        else BOTH)
    assert lines[1].startswith(f"StoreError store {path}: it is on a read-only file "
                               "system"), lines
    assert names == (["runs.db"] if left == "clean" else
                     ["runs.db", "runs.db-shm", "runs.db-wal"])


@contextlib.contextmanager
def _immutable(path: Path) -> Iterator[None]:
    if not _root_may("chattr", "+i", str(path)):
        pytest.skip("needs root and a file system with attributes (chattr +i)")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def test_an_immutable_store_is_read_without_creating_files(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    _clean(path)
    with _immutable(path):
        store = SQLiteStore(path)
        try:
            assert [r.run_id for r in store.runs()] == [RUN]
            assert [e.kind for e in store.events(RUN)][-1] is EventKind.RUN_FINISHED
            assert store.read_only
            with pytest.raises(cp.StoreError, match=rf"store {path}: {path} is immutable"):
                store.request_cancel(RUN)
        finally:
            store.close()
        assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.db"]


def test_an_immutable_store_whose_wal_holds_the_last_run(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    _with_the_last_run_in_its_wal(path)
    with _immutable(path):
        store = SQLiteStore(path)
        try:
            assert sorted(r.run_id for r in store.runs()) == [OLD, RUN]
            assert len(store.events(RUN)) == 3
            assert store.read_only
        finally:
            store.close()


def test_a_store_read_while_immutable_reads_its_own_writes_once_it_may_write(
        tmp_path: Path) -> None:
    """Opened read-only (as immutable: the -wal is not read), then ``chattr -i``: the
    first write opens the file again read-write, so the store sees what it wrote."""
    path = tmp_path / "runs.db"
    _clean(path)
    with _immutable(path):
        store = SQLiteStore(path)
        assert store.read_only and [r.run_id for r in store.runs()] == [RUN]
    try:
        store.append_many(OLD, [created(), finished(2)])
        store.flush_sync()
        assert not store.read_only
        assert sorted(r.run_id for r in store.runs()) == [OLD, RUN]
    finally:
        store.close()


def test_an_older_schema_that_cannot_be_migrated_is_refused_naming_why(
        tmp_path: Path) -> None:
    from counterpoint.store.schema import MIGRATIONS
    folder = tmp_path / "archive"
    folder.mkdir()
    path = folder / "runs.db"
    older = SQLiteStore(path, migrations=MIGRATIONS[:-1])
    older.append_many(RUN, [created(), finished(2)])
    older.close()
    with _read_only_folder(folder):
        lines = _read(path)
    assert lines == [
        f"StoreError store {path}: written by an older counterpoint (it lacks migrations "
        f"{MIGRATIONS[-1][0]}), and it cannot be written to apply them: its directory "
        f"{folder} is not writable, and SQLite must create runs.db-wal and runs.db-shm next "
        f"to the file (WAL mode); make {folder} writable, or copy the store to a writable "
        "directory"]
