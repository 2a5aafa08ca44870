"""Events, processes and file-system conditions the store tests share."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson

from counterpoint.events import Event, EventKind
from counterpoint.ids import NodeId, RunId
from counterpoint.store import RunStore, SharedStore, SQLiteStore

RUN = RunId("r-test")
KILLED_WRITER = r"its writer process \(pid \d+\) ended \(killed by signal 9, SIGKILL\)"
"""What a store says once its writer process was SIGKILLed."""
HOST = socket.gethostname()


def created(seq: int = 1, at: float = 1.0, graph: str = "g") -> Event:
    return Event(EventKind.RUN_CREATED, at, data={"graph": graph, "source": {"file": "x.py"},
                                                  "options": {}}, seq=seq)


def finished(seq: int, status: str = "succeeded", at: float = 3.0) -> Event:
    return Event(EventKind.RUN_FINISHED, at, data={"status": status}, seq=seq)


def node_event(seq: int, kind: EventKind = EventKind.NODE_READY, value: str | None = None,
               data: dict[str, object] | None = None) -> Event:
    return Event(kind, float(seq), NodeId(f"n{seq}"), 1, data, value, seq=seq)


def sqlite_of(store: RunStore) -> SQLiteStore | None:
    """The SQLite store behind ``store`` (itself, or a shared handle's), else ``None``."""
    if isinstance(store, SharedStore):
        return store.store
    return store if isinstance(store, SQLiteStore) else None


def entry(run: RunId, events: list[Event]) -> tuple[object, ...]:
    """One ``events`` entry of a writer batch (the layout :mod:`counterpoint.store.writer`
    documents), for driving the writer without a store."""
    rows = [(e.seq, e.kind, e.node, e.attempt, e.at, e.data, e.value, None) for e in events]
    return (run, events[0].seq, events[-1].seq, orjson.dumps(rows).decode()[1:-1],
            len(events), any(e.kind.startswith("run_") for e in events))


def gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (a zombie nobody reaped counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def writer_children() -> list[int]:
    """This process's children running the store's writer script (Linux /proc)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        with contextlib.suppress(OSError):
            stat = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
            if int(stat[1]) == os.getpid() and b"writer.py" in cmdline:
                found.append(int(name))
    return found


def python(code: str, *args: str) -> subprocess.Popen[str]:
    """A Python process running ``code`` with ``args``, talking over pipes."""
    return subprocess.Popen([sys.executable, "-c", code, *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def ended(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    """Close ``proc``'s input (its cue to finish) and wait for it: (code, out, err)."""
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err


@contextlib.contextmanager
def write_lock_held(path: Path) -> Iterator[None]:
    """Another process holds ``BEGIN IMMEDIATE`` on ``path`` (with a write pending) until
    the block ends; it says so on a pipe before the block starts."""
    holder = python(
        "import sqlite3, sys\n"
        "conn = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "conn.execute('BEGIN IMMEDIATE')\n"
        "conn.execute(\"INSERT INTO migrations VALUES ('held', 0)\")\n"
        "print('held', flush=True)\n"
        "sys.stdin.read()\n"
        "conn.execute('ROLLBACK')\n", str(path))
    assert holder.stdout is not None
    line = holder.stdout.readline()
    try:
        assert line == "held\n", holder.communicate(timeout=60)
        yield
    finally:
        code, _, err = ended(holder)
        assert code == 0, err


def owned_by_a_process(path: Path, run_id: RunId) -> subprocess.Popen[str]:
    """A process that created ``run_id`` in the store at ``path`` (committed) and now
    waits, owning it, until its input closes."""
    owner = python(
        "import sys\n"
        "from counterpoint.events import Event, EventKind\n"
        "from counterpoint.store import SQLiteStore\n"
        "store = SQLiteStore(sys.argv[1])\n"
        "store.append(sys.argv[2], Event(EventKind.RUN_CREATED, 1.0, data={'graph': 'g'},"
        " seq=1))\n"
        "store.flush_sync()\n"
        "print('created', flush=True)\n"
        "sys.stdin.read()\n", str(path), run_id)
    assert owner.stdout is not None
    line = owner.stdout.readline()
    assert line == "created\n", owner.communicate(timeout=60)
    return owner


_WITHOUT_DAC = """
import ctypes, os
def _subject_to_file_permissions():
    # root ignores file permissions through CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH and
    # CAP_FOWNER; without them it is held to them like any user (its children too)
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    caps = (1, 2, 3)
    for cap in caps:
        libc.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP: for the processes it starts
    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]
    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]
    header, data = Header(0x20080522, 0), (Data * 2)()
    if libc.capget(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capget")
    mask = ~sum(1 << cap for cap in caps) & 0xFFFFFFFF
    for field in ("effective", "permitted", "inheritable"):
        setattr(data[0], field, getattr(data[0], field) & mask)
    if libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset")
_subject_to_file_permissions()
"""


def unprivileged(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a Python process held to file permissions (when the tests run as
    root, without the capabilities that let root ignore them)."""
    return subprocess.run([sys.executable, "-c", _WITHOUT_DAC + code, *args],
                          capture_output=True, text=True, timeout=60)


CLI_MAIN = "import sys\nfrom counterpoint.cli import main\nsys.argv[0] = 'counterpoint'\nmain()\n"
"""The ``counterpoint`` command as code for :func:`unprivileged` (``python -c``)."""

ARCHIVE_FILES = ("runs.db", "runs.db-wal", "runs.db-shm")
_ARCHIVED_FLOWS = """
import os
import counterpoint as cp

ok = cp.Graph("ok")
ok.add("a", lambda: 1)

dies = cp.Graph("dies")
def boom() -> int:
    os._exit(9)  # the process dies: no checkpoint, its events stay in the -wal
dies.add("b", boom)
"""


def write_archive(folder: Path) -> None:
    """A store ``folder/runs.db`` as an archive or a CI artefact holds it: a finished run
    (``ok``) and one whose process died (``dies``, in the ``-wal`` only), every file and
    the folder read-only (give the folder 0o755 back when done)."""
    from support import run_cli  # tests/support.py: the command line as a user runs it

    (folder / "flows.py").write_text(_ARCHIVED_FLOWS)
    for graph, code in (("ok", 0), ("dies", 9)):
        done = run_cli("run", f"flows.py:{graph}", "--db", "runs.db", "-q", "--no-preflight",
                       cwd=folder)
        assert done.returncode == code, done.stdout + done.stderr
    (folder / "flows.py").unlink()
    for name in ARCHIVE_FILES:
        (folder / name).chmod(0o444)
    folder.chmod(0o555)


def file_digests(folder: Path) -> dict[str, str]:
    """SHA-256 of each of :data:`ARCHIVE_FILES` in ``folder``: to tell nothing wrote them."""
    import hashlib
    return {name: hashlib.sha256((folder / name).read_bytes()).hexdigest()
            for name in ARCHIVE_FILES}
