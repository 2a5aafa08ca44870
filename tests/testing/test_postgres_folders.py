"""Folders of PostgreSQL test servers left behind by a killed process are removed."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from counterpoint.testing.postgres import FOLDER_PREFIX, STALE_SECONDS, remove_stale_folders


def _folder(name: str, *, age: float, pid: int | None = None) -> Path:
    folder = Path(tempfile.gettempdir()) / f"{FOLDER_PREFIX}test-{name}-{os.getpid()}"
    (folder / "data").mkdir(parents=True, exist_ok=True)
    if pid is not None:
        (folder / "data" / "postmaster.pid").write_text(f"{pid}\n/some/data\n")
    then = time.time() - age
    os.utime(folder, (then, then))
    return folder


def test_only_old_folders_without_a_live_server_go() -> None:
    old_dead = _folder("old-dead", age=STALE_SECONDS * 2, pid=2 ** 22 + 12345)
    old_none = _folder("old-none", age=STALE_SECONDS * 2)
    old_live = _folder("old-live", age=STALE_SECONDS * 2, pid=os.getpid())
    fresh = _folder("fresh", age=5)
    try:
        removed = remove_stale_folders()
        assert {old_dead, old_none} <= set(removed)
        assert not old_dead.exists() and not old_none.exists()
        assert old_live.exists() and fresh.exists()
        assert old_live not in removed and fresh not in removed
    finally:
        for folder in (old_live, fresh):
            for path in sorted(folder.rglob("*"), reverse=True):
                path.unlink() if path.is_file() else path.rmdir()
            folder.rmdir()
