"""What is wrong with a store's location, said in words a user can act on.

The SQLite store asks these before it touches the file system, and again when SQLite
or the OS refuses, so an unusable ``--db`` is a :class:`~counterpoint.errors.StoreError`
naming the path, the problem and the fix, never an ``OSError`` from deep inside.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from pathlib import Path

from ..errors import StoreError

ELSEWHERE = "or point --db / COUNTERPOINT_DB elsewhere"


def creation_problem(path: Path) -> str | None:
    """Why the store file ``path`` (which does not exist) could not be created, or
    ``None`` if it could (as far as permissions and the file system tell). Reads only,
    but for a file system that reports no blocks (see :func:`_file_system_problem`)."""
    parent = path.parent
    while True:
        try:
            info = os.stat(parent)
        except (FileNotFoundError, NotADirectoryError):
            if parent == parent.parent:
                return f"no directory on the way to {path} exists"
            parent = parent.parent
            continue
        except PermissionError:
            return (f"no permission to look into {parent.parent}; fix its permissions "
                    f"{ELSEWHERE}")
        break
    if not stat.S_ISDIR(info.st_mode):
        return (f"{parent} is a file, not a directory, so nothing can be created under it; "
                f"choose a path in a directory (e.g. {parent.parent / 'runs.db'}), "
                f"{ELSEWHERE}")
    problem = _file_system_problem(parent)
    if problem is not None:
        return problem
    if not os.access(parent, os.W_OK | os.X_OK):
        what = "the store file" if parent == path.parent else "its directories"
        return (f"no permission to create {what} in {parent}; make {parent} writable "
                f"{ELSEWHERE}")
    return None


def existing_problem(path: Path, *, writing: bool) -> str | None:
    """Why the existing store file ``path`` cannot be read (or, with ``writing``, also
    written), or ``None`` if nothing the OS reports stands in the way. A reader that
    cannot create the WAL files asks :func:`.sqlite_access.choose` how to read it."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    except PermissionError:
        return f"no permission to look into {path.parent}; fix its permissions {ELSEWHERE}"
    if stat.S_ISDIR(info.st_mode):
        return (f"{path} is a directory; pass the path of a file in it (e.g. "
                f"{path / 'runs.db'})")
    if not stat.S_ISREG(info.st_mode):
        return (f"{path} is not a regular file (a device, a pipe or a socket); pass the "
                f"path of a SQLite file, e.g. ./runs.db")
    if not os.access(path, os.R_OK):
        return f"no permission to read {path}; fix its permissions (chmod u+rw) {ELSEWHERE}"
    directory = path.parent
    mounted_read_only = read_only_file_system(path)
    if writing and not os.access(directory, os.W_OK | os.X_OK) and \
            not wal_files_usable(path):
        wal = (f"SQLite must create {path.name}-wal and {path.name}-shm next to the file "
               "(WAL mode)")
        if mounted_read_only:
            return (f"it is on a read-only file system, and {wal}; copy the store to a "
                    "writable disk, or mount it read-write")
        return (f"its directory {directory} is not writable, and {wal}; make {directory} "
                "writable, or copy the store to a writable directory")
    if writing and not os.access(path, os.W_OK):
        if mounted_read_only:
            return (f"{path} is on a read-only file system; mount it read-write, or copy "
                    f"the store to a writable disk {ELSEWHERE}")
        if immutable(path):
            return (f"{path} is immutable (lsattr shows 'i'), so not even root may write "
                    f"it; clear the flag (chattr -i {path}) {ELSEWHERE}")
        return (f"{path} is read-only; make it writable (chmod u+w) {ELSEWHERE}")
    return None


def read_only_file_system(path: Path) -> bool:
    """Whether ``path`` is on a file system mounted read-only (chmod cannot help)."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


FS_IOC_GETFLAGS = 0x80086601
"""Linux's ioctl reading an inode's attributes (``lsattr``); ``FS_IMMUTABLE_FL`` is one."""
FS_IMMUTABLE_FL = 0x10


def immutable(path: Path) -> bool:
    """Whether ``path`` carries Linux's immutable attribute (``chattr +i``): root's
    ``os.access`` then says no to writing although the permissions say yes."""
    if sys.platform != "linux":
        return False
    import array
    import fcntl
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        flags = array.array("l", [0])
        fcntl.ioctl(fd, FS_IOC_GETFLAGS, flags, True)
    except OSError:  # a file system without attributes
        return False
    finally:
        os.close(fd)
    return bool(flags[0] & FS_IMMUTABLE_FL)


def writing_problem(path: Path, *, create_directories: bool = True) -> str | None:
    """Why a run could not be recorded in the store file ``path`` (to be created, or
    existing), or ``None``; without ``create_directories``, a missing directory of the
    file is a problem too (the store would create it at the first write: a misspelt
    directory made a new store nobody looks in)."""
    try:
        os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        problem = creation_problem(path)
        if problem is None and not create_directories and not path.parent.is_dir():
            return (f"its directory {path.parent} does not exist; create it first (mkdir "
                    f"-p {path.parent}), or correct the path (--db / COUNTERPOINT_DB)")
        return problem
    except OSError:
        pass  # existing_problem says what stands in the way
    return existing_problem(path, writing=True)


def error(path: Path, problem: str) -> StoreError:
    """The error for ``problem`` with the store at ``path``."""
    return StoreError(f"store {path}: {problem}")


def os_error(path: Path, exc: OSError, *, writing: bool = True) -> StoreError:
    """An ``OSError`` met while creating the store at ``path``, as a :class:`StoreError`."""
    problem = existing_problem(path, writing=writing) if path.exists() else \
        creation_problem(path)
    if problem is None:
        reason = os.strerror(exc.errno) if exc.errno is not None else str(exc)
        where = f" ({exc.filename})" if exc.filename else ""
        hint = "free some disk space" if exc.errno == errno.ENOSPC else \
            "check the path and its permissions"
        problem = f"cannot be created: {reason}{where}; {hint} {ELSEWHERE}"
    return error(path, problem)


def wal_files_usable(path: Path) -> bool:
    """Whether the WAL files exist already and can be written (another process has the
    store open): then a store in a read-only directory can still be opened."""
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        if not (side.exists() and os.access(side, os.R_OK | os.W_OK)):
            return False
    return True


def _file_system_problem(directory: Path) -> str | None:
    """Why no file can be created on the file system of ``directory`` whatever its
    permissions say (root's ``os.access`` says yes to ``/proc``), or ``None``.

    A file system with no blocks (``/proc``, ``/sys``) is tried: a file is created and
    removed at once, since some network and FUSE file systems report no blocks and
    hold files all the same."""
    try:
        info = os.statvfs(directory)
    except OSError:
        return None  # nothing to tell: the permission checks and the OS's error speak
    if info.f_flag & os.ST_RDONLY:
        return (f"{directory} is on a read-only file system, so the store file cannot be "
                f"created there; choose a path on a writable disk (e.g. ./runs.db) "
                f"{ELSEWHERE}")
    if info.f_blocks:
        return None
    probe = directory / f".counterpoint-probe-{os.getpid()}"
    try:
        os.close(os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        return None
    except OSError as exc:
        return (f"no file can be created in {directory} ({os.strerror(exc.errno or 0)}): "
                f"it is not on a disk (a pseudo file system such as /proc or /sys); choose "
                f"a path on a disk (e.g. ./runs.db) {ELSEWHERE}")
    os.unlink(probe)
    return None
