"""A store location the OS will not let the store use is a StoreError that names the
path, what is wrong and what to do (defect 18; :mod:`counterpoint.store.paths`)."""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path

import pytest

import counterpoint as cp
from counterpoint.store import SQLiteStore, open_store, paths

from .helpers import RUN, created, unprivileged

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")

_OPEN = """
import sys
import counterpoint as cp
from counterpoint.events import Event, EventKind
from counterpoint.store import SQLiteStore
try:
    store = SQLiteStore(sys.argv[1])
    print("opened", [r.run_id for r in store.runs()], flush=True)
    if len(sys.argv) > 2:
        store.append("r-new", Event(EventKind.RUN_CREATED, 0.0, data={"graph": "g"}, seq=1))
        store.flush_sync()
        print("wrote", flush=True)
    store.close()
except cp.StoreError as exc:
    print(type(exc).__name__, exc)
"""


def _store_with_a_run(path: Path) -> None:
    store = SQLiteStore(path)
    store.append(RUN, created())
    store.close()


def test_a_store_under_a_regular_file(tmp_path: Path) -> None:
    file = tmp_path / "somefile.txt"
    file.write_text("notes\n")
    path = file / "runs.db"
    for where in (path, file / "deeper" / "runs.db"):
        with pytest.raises(cp.StoreError, match=rf"store {where}: {file} is a file, not a "
                                                r"directory.*choose a path in a directory"):
            SQLiteStore(where)
        with pytest.raises(cp.StoreError, match=rf"{file} is a file"):
            open_store(where)
    assert file.read_text() == "notes\n"


def test_a_store_that_is_a_directory(tmp_path: Path) -> None:
    with pytest.raises(cp.StoreError, match=rf"store {tmp_path}: {tmp_path} is a directory; "
                                            rf"pass the path of a file in it"):
        SQLiteStore(tmp_path)


def test_a_store_in_a_directory_without_write_permission(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    for where in (locked / "runs.db", locked / "sub" / "runs.db"):
        done = unprivileged(_OPEN, str(where))
        assert done.stdout.startswith(f"StoreError store {where}: no permission to create "), \
            (done.stdout, done.stderr)
        assert f"make {locked} writable" in done.stdout
    assert list(locked.iterdir()) == []


def test_a_store_in_a_read_only_directory_is_read_and_refused_at_the_first_write(
        tmp_path: Path) -> None:
    """Read through a read-only connection (more cases: test_read_only_stores.py)."""
    folder = tmp_path / "archive"
    folder.mkdir()
    path = folder / "runs.db"
    _store_with_a_run(path)
    folder.chmod(0o555)
    try:
        done = unprivileged(_OPEN, str(path), "write")
    finally:
        folder.chmod(0o755)
    lines = done.stdout.splitlines()
    assert lines[0] == f"opened ['{RUN}']", (done.stdout, done.stderr)
    assert lines[1].startswith(f"StoreError store {path}: its directory {folder} is not "
                               "writable, and SQLite must create runs.db-wal"), lines
    assert f"make {folder} writable" in lines[1]


def test_a_read_only_store_is_read_and_refused_at_the_first_write(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    _store_with_a_run(path)
    path.chmod(0o444)
    done = unprivileged(_OPEN, str(path), "write")
    lines = done.stdout.splitlines()
    assert lines[0] == f"opened ['{RUN}']", (done.stdout, done.stderr)
    assert lines[1].startswith(f"StoreError store {path}: {path} is read-only; make it "
                               "writable"), (done.stdout, done.stderr)


def test_a_store_without_read_permission(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    _store_with_a_run(path)
    path.chmod(0o000)
    done = unprivileged(_OPEN, str(path))
    assert done.stdout.startswith(f"StoreError store {path}: no permission to read {path}"), \
        (done.stdout, done.stderr)


def test_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    path.write_text("name,price\napples,3\n" * 200)
    with pytest.raises(cp.StoreCorrupt, match=rf"store {path}: not a readable SQLite database "
                                              r".*the file was not modified; move it away"):
        SQLiteStore(path)


def test_a_database_from_a_newer_schema(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    _store_with_a_run(path)
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO migrations VALUES ('9999_later', 0)")
    conn.commit()
    conn.close()
    with pytest.raises(cp.StoreTooNew, match=rf"store {path}: written by a newer counterpoint "
                                             r"\(unknown migrations: 9999_later\); upgrade"):
        SQLiteStore(path)


def test_permissions_hold_in_the_unprivileged_helper(tmp_path: Path) -> None:
    """The tests above mean something only if their child process is held to file
    permissions (as root, the helper drops the capabilities that lift them)."""
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    done = unprivileged("import os, sys; print(os.access(sys.argv[1], os.W_OK))", str(locked))
    assert done.stdout.strip() == "False", done.stderr
    assert os.access(locked, os.R_OK)


def _root_may(*command: str) -> bool:
    """Whether this process may run ``command`` (root with its capabilities, on a file
    system that supports it); the tests below then use it for real."""
    import shutil
    import subprocess
    if os.geteuid() != 0 or shutil.which(command[0]) is None:
        return False
    return subprocess.run(command, capture_output=True).returncode == 0


def test_an_immutable_store_names_the_attribute_not_chmod(tmp_path: Path) -> None:
    """``chattr +i`` stops even root; "chmod u+w" would not help (its mode allows it)."""
    import subprocess
    path = tmp_path / "runs.db"
    _store_with_a_run(path)
    if not _root_may("chattr", "+i", str(path)):
        pytest.skip("needs root and a file system with attributes (chattr +i)")
    try:
        problem = paths.writing_problem(path)
        read = paths.existing_problem(path, writing=False)
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)
    assert problem == (f"{path} is immutable (lsattr shows 'i'), so not even root may write "
                       f"it; clear the flag (chattr -i {path}) or point --db / "
                       "COUNTERPOINT_DB elsewhere")
    assert read is None


def test_a_store_on_a_read_only_mount_names_the_mount_not_chmod(tmp_path: Path) -> None:
    import subprocess
    folder, mount = tmp_path / "disk", tmp_path / "mounted"
    folder.mkdir()
    mount.mkdir()
    _store_with_a_run(folder / "runs.db")
    if not _root_may("mount", "--bind", str(folder), str(mount)):
        pytest.skip("needs root with CAP_SYS_ADMIN (a read-only bind mount)")
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(mount)], check=True)
        path = mount / "runs.db"
        problem = paths.writing_problem(path)
        created = paths.writing_problem(mount / "new.db")
    finally:
        subprocess.run(["umount", str(mount)], check=True)
    assert problem == ("it is on a read-only file system, and SQLite must create "
                       "runs.db-wal and runs.db-shm next to the file (WAL mode); copy the "
                       "store to a writable disk, or mount it read-write")
    assert created is not None and created.startswith(f"{mount} is on a read-only file "
                                                      "system")
