"""How the SQLite store's reading connection opens its file: read-write, read-only, or
as an immutable file, whichever shows the store's latest committed state.

In WAL mode SQLite reads through two files next to the store, ``-wal`` (commits not yet
copied into the file) and ``-shm`` (the index of the ``-wal``), and creates them when
they are missing. A store that cannot be written (a read-only folder or mount, a file
``chattr +i`` made immutable) is read thus, as SQLite 3.40 behaves (tested by
``tests/store/test_read_only_stores.py``):

- ``mode=ro`` reads the ``-wal`` through an existing ``-shm``, even a read-only one, and
  sees what a writer with other permissions commits meanwhile. Without the two files it
  must create them, and fails in a folder it cannot write to.
- ``immutable=1`` reads the file alone, with no locks, and ignores a ``-wal``: correct
  only when the ``-wal`` holds nothing and nothing can write the file.
- A ``-wal`` with commits but no ``-shm``, in a folder where it cannot be created, can be
  read neither way (``immutable=1`` would show an older state): that is refused, saying
  how to read a copy.

A read-only folder on a writable mount may gain a writer (a user allowed to write it):
a store read there as immutable is watched (:func:`changed`) and opened again when its
``-wal`` appears or the file changes, before each read. A writer that starts and
checkpoints within a single read goes unseen by that read (the next one sees it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from . import paths

Stamp = tuple[int, int, int, int] | None
"""A file's (device, inode, size, mtime in ns), or ``None`` if it does not exist."""
WAL_HEADER = 32
"""Bytes of a ``-wal`` file's header: a longer one holds frames (commits)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Access:
    """How to open a store file for reading."""

    options: str
    """The SQLite URI query: ``mode=rw``, ``mode=ro`` or ``mode=ro&immutable=1``."""
    read_only: bool
    """Whether this connection cannot write (a write must then be refused)."""
    watched: bool = False
    """Read as immutable although a writer could appear: see :func:`changed`."""
    signature: tuple[Stamp, Stamp] = (None, None)
    """The file's and its ``-wal``'s (device, inode, size, mtime) when it was opened."""


READ_WRITE = Access(options="mode=rw", read_only=False)


def choose(path: Path) -> Access | str:
    """How to read the existing store file ``path``, or why it cannot be read (a problem
    for :func:`.paths.error`). Reads the file's and its folder's status only."""
    directory = path.parent
    mount_read_only = paths.read_only_file_system(path)
    nothing_writes = mount_read_only or paths.immutable(path)
    can_create = not mount_read_only and os.access(directory, os.W_OK | os.X_OK)
    wal, shm = _side(path, "-wal"), _side(path, "-shm")
    if not nothing_writes and os.access(path, os.W_OK) and (
            can_create or paths.wal_files_usable(path)):
        return READ_WRITE
    frames = _holds_frames(wal)
    if nothing_writes and not frames:
        return Access(options="mode=ro&immutable=1", read_only=True)  # the file is all
    if (wal.exists() and shm.exists()) or can_create:
        return Access(options="mode=ro", read_only=True)
    if not frames:  # a read-only folder, nothing writing now: a writer may start later
        return Access(options="mode=ro&immutable=1", read_only=True, watched=True,
                      signature=_signature(path))
    where, fix = ("is on a read-only file system", "mount it read-write") \
        if mount_read_only else ("is not writable", f"make {directory} writable")
    return (f"its {wal.name} holds commits not yet in {path.name}, which SQLite reads only "
            f"through {shm.name}, missing, and {directory} {where} so it cannot be "
            f"created; copy {path.name} and {wal.name} together to a writable directory "
            f"and read the copy (--db COPY), or {fix}")


def changed(path: Path, access: Access) -> bool:
    """Whether a watched store (read as immutable) may have changed since it was opened
    with ``access``: the file or its ``-wal`` is not as it was (a ``-wal`` appeared: a
    writer started)."""
    if not access.watched:
        return False
    return _signature(path) != access.signature


def _side(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


def _holds_frames(wal: Path) -> bool:
    try:
        return os.stat(wal).st_size > WAL_HEADER
    except OSError:
        return False


def _signature(path: Path) -> tuple[Stamp, Stamp]:
    return _stamp(path), _stamp(_side(path, "-wal"))


def _stamp(path: Path) -> Stamp:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
