"""The README's PostgreSQL section: its example runs as shown against a real server, and
the commands and errors it names are the ones counterpoint has."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from counterpoint.testing.postgres import PostgresServer

ROOT = Path(__file__).resolve().parents[2]
SECTION = (ROOT / "README.md").read_text().split("### PostgreSQL\n", 1)[1].split("\n## ", 1)[0]


def test_the_example_runs_as_shown(tmp_path: Path, postgres_server: PostgresServer) -> None:
    [example] = re.findall(r"```py\n(.*?)```", SECTION, flags=re.S)
    env = {**os.environ, "COUNTERPOINT_DB": postgres_server.create_database()}
    proc = subprocess.run([sys.executable, "-c", example], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["succeeded succeeded postgresql"]
    assert not (tmp_path / ".counterpoint").exists()  # nothing went to a SQLite file


def test_the_commands_it_names_take_a_url() -> None:
    commands = set(re.findall(r"counterpoint (run|runs|resume|ui|show|cancel|approve)\b",
                              SECTION))
    assert {"run", "runs", "resume", "ui", "show", "cancel", "approve"} <= commands
    for command in sorted(commands):
        done = subprocess.run([sys.executable, "-m", "counterpoint.cli", command, "--help"],
                              capture_output=True, text=True, timeout=60,
                              env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"})
        assert done.returncode == 0, done.stderr
        assert "--db" in done.stdout and "postgresql://" in done.stdout, (command, done.stdout)


def test_the_errors_it_quotes_are_the_stores() -> None:
    source = "".join((ROOT / "src" / "counterpoint" / "store" / name).read_text()
                     for name in ("postgres_url.py", "schema.py"))
    for quoted in ("cannot reach the PostgreSQL server", "the server refused the login",
                   "the database does not exist", "written by a newer counterpoint",
                   "upgrade counterpoint to use it", "wait for it to finish or use another --db",
                   "is locked by another process"):
        assert quoted in re.sub(r"\s+", " ", SECTION), quoted
        assert quoted in source, quoted
