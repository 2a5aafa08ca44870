"""A real PostgreSQL server in a temporary folder, for tests and benchmarks.

:class:`PostgresServer` runs the distribution's own ``initdb`` and ``pg_ctl`` (Debian's
``postgresql`` package puts them in ``/usr/lib/postgresql/VERSION/bin``; ``PATH`` is
searched too) on a fresh data folder, listening on a free loopback port and on a Unix
socket in that folder. PostgreSQL refuses to run as root, so when the caller is root the
server runs as the ``postgres`` user, who is given the folder. The superuser's password
is set at ``initdb`` and required over TCP (``scram-sha-256``): tests of a wrong
password fail as they would against a real deployment. Nothing is downloaded: if the
binaries are missing, :meth:`PostgresServer.start` raises a ``RuntimeError`` saying to
install the package (tests that need the server fail rather than skip).

Use it as a context manager, or :meth:`~PostgresServer.start` /
:meth:`~PostgresServer.stop`; :meth:`~PostgresServer.create_database` makes a fresh
database and returns its URL (without the password: pass :attr:`~PostgresServer.env`,
which holds ``PGPASSWORD``, to processes, or set it in ``os.environ``).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

__all__ = ["PostgresServer", "find_binaries"]

_RUN_AS = "postgres"
PASSWORD = "counterpoint-test"
"""The superuser's password on a test server (it is a test server on loopback)."""


def find_binaries() -> Path:
    """The folder holding ``initdb`` and ``pg_ctl``: the newest
    ``/usr/lib/postgresql/*/bin``, else the one on ``PATH``. Raises ``RuntimeError``
    naming the package to install if there is none."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(Path(p).parent.parent.name)
                   if Path(p).parent.parent.name.isdigit() else 0)
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    if on_path is not None and shutil.which("pg_ctl") is not None:
        return Path(on_path).resolve().parent
    raise RuntimeError("PostgreSQL's server binaries (initdb, pg_ctl) were not found in "
                       "/usr/lib/postgresql/*/bin or on PATH; install them with "
                       "`apt-get install postgresql` (the PostgreSQL store's tests need a "
                       "real server)")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PostgresServer:
    """A PostgreSQL server of its own, in a temporary folder (see the module docstring).

    ``settings`` are extra ``postgres -c`` settings (e.g. ``{"fsync": "off"}`` for
    tests that need no durability across a power loss).
    """

    def __init__(self, *, settings: Mapping[str, str] | None = None,
                 start_timeout: float = 60.0) -> None:
        self.settings = dict(settings or {})
        self.start_timeout = start_timeout
        self.port = 0
        self.folder: Path | None = None
        self._bin: Path | None = None
        self._user: str | None = None
        self._databases = 0

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> PostgresServer:
        """``initdb`` a fresh cluster and start it; returns once it accepts connections."""
        self._bin = find_binaries()
        self._user = _RUN_AS if os.geteuid() == 0 else None
        remove_stale_folders()
        self.folder = Path(tempfile.mkdtemp(prefix=FOLDER_PREFIX))
        data, pwfile = self.folder / "data", self.folder / "pwfile"
        pwfile.write_text(PASSWORD + "\n")
        if self._user is not None:  # the server's user must own its folder
            record = pwd.getpwnam(self._user)
            for path in (self.folder, pwfile):
                os.chown(path, record.pw_uid, record.pw_gid)
        self._run("initdb", "-D", str(data), "-U", "postgres", "--auth-local=trust",
                  "--auth-host=scram-sha-256", f"--pwfile={pwfile}", "-E", "UTF8",
                  "--no-instructions")
        self.port = _free_port()
        options = [f"-p {self.port}", f"-k {self.folder}", "-c listen_addresses=127.0.0.1"]
        options += [f"-c {key}={value}" for key, value in self.settings.items()]
        self._run("pg_ctl", "-D", str(data), "-l", str(self.folder / "server.log"), "-w",
                  "-t", str(int(self.start_timeout)), "-o", " ".join(options), "start")
        return self

    def stop(self) -> None:
        """Stop the server (fast shutdown) and remove its folder. Idempotent."""
        folder, self.folder = self.folder, None
        if folder is None:
            return
        try:
            if (folder / "data" / "postmaster.pid").exists():
                self._run("pg_ctl", "-D", str(folder / "data"), "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def _run(self, tool: str, *args: str) -> str:
        assert self._bin is not None
        done = subprocess.run([str(self._bin / tool), *args], capture_output=True, text=True,
                              user=self._user, cwd=self.folder, timeout=self.start_timeout + 30)
        if done.returncode != 0:
            log = ""
            if self.folder is not None and (self.folder / "server.log").exists():
                log = (self.folder / "server.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"{tool} failed ({done.returncode}): {done.stderr.strip()} "
                               f"{done.stdout.strip()} {log}".strip())
        return done.stdout

    # ------------------------------------------------------------------ using it
    @property
    def env(self) -> dict[str, str]:
        """Environment variables that let a client log in: ``PGPASSWORD``."""
        return {"PGPASSWORD": PASSWORD}

    def url(self, database: str = "postgres", *, user: str = "postgres") -> str:
        """The URL of ``database`` over TCP on loopback, without a password."""
        return f"postgresql://{user}@127.0.0.1:{self.port}/{database}"

    def psql(self, sql: str, database: str = "postgres") -> str:
        """Run ``sql`` with ``psql`` over the Unix socket (as the superuser, no password);
        returns its unaligned output."""
        assert self.folder is not None, "the server is not started"
        return self._run("psql", "-h", str(self.folder), "-p", str(self.port), "-U",
                         "postgres", "-d", database, "-X", "-q", "-A", "-t",
                         "-v", "ON_ERROR_STOP=1", "-c", sql).strip()

    def create_database(self, name: str | None = None) -> str:
        """A new, empty database (named ``name``, or ``db_N``); returns its URL."""
        self._databases += 1
        name = name or f"db_{self._databases}"
        self.psql(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def terminate_backends(self, database: str) -> int:
        """``pg_terminate_backend`` every other connection to ``database`` (a dropped
        connection, as a server restart or a network cut gives); how many were ended."""
        out = self.psql("SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM "
                        f"pg_stat_activity WHERE datname = '{database}' AND "
                        "pid <> pg_backend_pid()")
        return int(out or 0)


FOLDER_PREFIX = "counterpoint-pg-"
STALE_SECONDS = 3600.0
"""A server folder this old whose server does not run was left by a killed process."""


def remove_stale_folders(now: float | None = None) -> list[Path]:
    """Remove the folders of servers that a process killed before :meth:`stop` left in the
    temporary directory (hundreds of MB each): older than :data:`STALE_SECONDS`, and no
    live postmaster in them. Returns the folders removed."""
    removed = []
    now = time.time() if now is None else now
    for folder in Path(tempfile.gettempdir()).glob(FOLDER_PREFIX + "*"):
        try:
            if now - folder.stat().st_mtime < STALE_SECONDS or _postmaster_alive(folder):
                continue
        except OSError:
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


def _postmaster_alive(folder: Path) -> bool:
    try:
        pid = int((folder / "data" / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
