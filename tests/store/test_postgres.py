"""The PostgreSQL store against a real server: clear errors, a dropped connection, and
claims raced by real processes (:mod:`counterpoint.store.postgres`)."""

from __future__ import annotations

import os

import psycopg
import pytest

import counterpoint as cp
from counterpoint.errors import StoreError, StoreTooNew
from counterpoint.store import open_store
from counterpoint.store.postgres import PostgresStore
from counterpoint.testing.postgres import PostgresServer

from .helpers import HOST, RUN, created, ended, finished, node_event, python


def test_a_bad_url_is_a_clear_error() -> None:
    with pytest.raises(StoreError, match="not a valid PostgreSQL URL"):
        open_store("postgresql://u@localhost:notaport/db")
    with pytest.raises(StoreError, match="names no database"):
        open_store("postgresql://u@localhost:5432")
    # the URL as given ("postgres::" before), and libpq's message on one line
    with pytest.raises(StoreError, match=r"^store postgres://: the URL names no database"):
        open_store("postgres://")
    with pytest.raises(StoreError) as caught:
        open_store("postgresql://%zz@h/x")
    assert "\n" not in str(caught.value) and '"%zz")' in str(caught.value)


def test_an_unreachable_server_is_a_clear_error_without_the_password(
        postgres_server: PostgresServer) -> None:
    url = f"postgresql://u:hunter2@127.0.0.1:{postgres_server.port + 1}/db"
    with pytest.raises(StoreError, match="cannot reach the PostgreSQL server") as caught:
        open_store(url)
    assert "hunter2" not in str(caught.value) and "u:***@" in str(caught.value)


def test_a_host_that_is_not_there_is_a_clear_error() -> None:
    # a Unix socket folder that does not exist: a bad host without leaving the machine
    with pytest.raises(StoreError, match=r"cannot reach the PostgreSQL server.*"
                                         r"nonexistent-dir.*check that it runs"):
        open_store("postgresql://postgres@/db?host=/nonexistent-dir")


def test_a_missing_database_is_a_clear_error(postgres_server: PostgresServer) -> None:
    with pytest.raises(StoreError, match=r"database does not exist.*createdb"):
        open_store(postgres_server.url("not_created"))


def test_a_wrong_password_is_a_clear_error_without_it(postgres_server: PostgresServer) -> None:
    url = postgres_server.url().replace("postgres@", "postgres:wrong-secret@")
    with pytest.raises(StoreError, match=r"refused the login.*PGPASSWORD") as caught:
        open_store(url)
    assert "wrong-secret" not in str(caught.value)


def test_a_database_with_a_newer_schema_is_refused_and_left_alone(
        postgres_server: PostgresServer) -> None:
    url = postgres_server.create_database()
    store = PostgresStore(url)
    store.migrate()
    store.close()
    with psycopg.connect(url) as conn:
        conn.execute("INSERT INTO cp_migrations (name, applied_at) VALUES ('9999_future', 0)")
    with pytest.raises(StoreTooNew, match=r"newer counterpoint.*9999_future.*upgrade "
                                          r"counterpoint.*database was not modified"):
        PostgresStore(url)


def test_the_writer_survives_a_dropped_connection(postgres_server: PostgresServer) -> None:
    url = postgres_server.create_database()
    store = PostgresStore(url)
    try:
        store.append(RUN, created())
        store.flush_sync()
        assert postgres_server.terminate_backends(url.rsplit("/", 1)[1]) >= 1
        store.append(RUN, node_event(2))
        store.append(RUN, finished(3))
        store.flush_sync()  # reconnected and committed the batch once
        assert [e.seq for e in store.events(RUN)] == [1, 2, 3]
        assert store.run(RUN).status == "succeeded"
    finally:
        store.close()


_OWNER = """
import sys
from counterpoint.events import Event, EventKind
from counterpoint.store import open_store
store = open_store(sys.argv[1])
store.append(sys.argv[2], Event(EventKind.RUN_CREATED, 1.0, data={'graph': 'g'}, seq=1))
store.flush_sync()
print('created', flush=True)
sys.stdin.read()
"""
_CLAIMANT = """
import os, socket, sys
from counterpoint.errors import RunClaimed
from counterpoint.store import open_store
store = open_store(sys.argv[1])
print("ready", flush=True)
sys.stdin.readline()
try:
    store.claim(sys.argv[2], pid=os.getpid(), host=socket.gethostname())
    print("won", flush=True)
except RunClaimed as exc:
    print("lost", exc, flush=True)
sys.stdin.read()
store.close()
"""


def test_processes_claiming_a_run_at_once_on_one_database_exactly_one_wins(
        postgres_server: PostgresServer) -> None:
    url = postgres_server.create_database()
    owner = python(_OWNER, url, RUN)
    assert owner.stdout is not None and owner.stdout.readline() == "created\n"
    owner.kill()
    owner.wait(timeout=60)
    procs = [python(_CLAIMANT, url, RUN) for _ in range(2)]
    try:
        for proc in procs:
            assert proc.stdout is not None
            assert proc.stdout.readline() == "ready\n", proc.communicate(timeout=60)
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        answers = [proc.stdout.readline() for proc in procs if proc.stdout is not None]
    finally:
        results = [ended(proc) for proc in procs]
    assert all(code == 0 for code, _, _ in results), results
    winners = [p.pid for p, a in zip(procs, answers, strict=True) if a == "won\n"]
    assert len(winners) == 1, answers
    loser = next(a for a in answers if a != "won\n")
    assert loser.startswith(f"lost run {RUN} is being resumed by process {winners[0]} "
                            f"on {HOST}"), loser
    store = PostgresStore(url)
    try:
        assert store.run(RUN).owner_pid == winners[0]
        store.claim(RUN, pid=os.getpid(), host=HOST)  # the winner has ended: it may go on
        assert store.run(RUN).owner_pid == os.getpid()
    finally:
        store.close()


def test_the_cli_takes_a_postgres_url_and_exits_2_without_the_password(
        postgres_server: PostgresServer) -> None:
    import subprocess
    import sys

    url = postgres_server.create_database()
    env = {**os.environ, "COUNTERPOINT_DB": url}
    listed = subprocess.run([sys.executable, "-m", "counterpoint.cli", "runs"], env=env,
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0 and "no runs in postgresql://" in listed.stdout, listed
    bad = url.replace("postgres@", "postgres:not-this-one@")
    refused = subprocess.run([sys.executable, "-m", "counterpoint.cli", "runs", "--db", bad],
                             env={**env, "PGPASSWORD": ""}, capture_output=True, text=True,
                             timeout=120)
    assert refused.returncode == 2, refused
    assert "refused the login" in refused.stderr + refused.stdout
    assert "not-this-one" not in refused.stderr + refused.stdout
    assert "Traceback" not in refused.stderr


@pytest.mark.parametrize(("url", "redacted", "without"), [
    ("postgresql://app:s3cret@db:5432/runs", "postgresql://app:***@db:5432/runs",
     "postgresql://app@db:5432/runs"),
    # libpq takes the password in the query too: it was printed as it is
    ("postgresql://app@db/runs?password=s3cret&sslmode=require",
     "postgresql://app@db/runs?password=***&sslmode=require",
     "postgresql://app@db/runs?sslmode=require"),
    ("postgres://app:one@db/runs?password=two", "postgres://app:***@db/runs?password=***",
     "postgres://app@db/runs"),
    ("postgresql://app@db/runs?sslmode=require", "postgresql://app@db/runs?sslmode=require",
     "postgresql://app@db/runs?sslmode=require"),
])
def test_a_password_in_the_user_info_or_the_query_is_never_shown(
        url: str, redacted: str, without: str) -> None:
    from counterpoint.store.postgres_url import redact, without_password
    assert redact(url) == redacted
    assert without_password(url) == without


def test_a_store_opened_before_the_tables_existed_sees_what_others_write(
        postgres_server: PostgresServer) -> None:
    """A reader opened on a fresh database (the web view, first) read nothing for ever:
    it had found no tables, and never looked again once another process made them."""
    url = postgres_server.create_database()
    reader = open_store(url)
    writer = open_store(url)
    try:
        assert reader.runs() == [] and reader.cancel_requests() == set()
        g = cp.Graph("later")
        g.add("one", lambda: 1)
        run_id = cp.run_sync(g, store=writer).run_id
        assert [r.run_id for r in reader.runs()] == [run_id]
        assert reader.run(run_id).status == "succeeded"
    finally:
        writer.close()
        reader.close()
