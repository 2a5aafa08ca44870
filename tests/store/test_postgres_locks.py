"""A PostgreSQL database locked by another session (:mod:`counterpoint.store.postgres`):
the store fails with :class:`~counterpoint.errors.StoreLocked` after its bounded
``lock_timeout``, naming the database without its password and saying what to do, and
what it had committed stays committed."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from counterpoint.errors import StoreLocked
from counterpoint.store.postgres import PostgresStore
from counterpoint.store.postgres_schema import MIGRATION_LOCK
from counterpoint.testing.postgres import PASSWORD, PostgresServer

from .helpers import RUN, created, finished, node_event

WAIT = 0.2
"""The stores' ``lock_timeout`` here: short, so a test waits for it briefly."""


@pytest.fixture
def url(postgres_server: PostgresServer) -> str:
    """A fresh database's URL, with the password in it (to check it is never shown)."""
    plain = postgres_server.create_database()
    return plain.replace("postgres@", f"postgres:{PASSWORD}@")


@pytest.fixture
def locker(url: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """Another session on the database; what it locks is held until the test ends."""
    with psycopg.connect(url) as conn:
        yield conn
        conn.rollback()


def _check_message(error: StoreLocked, url: str) -> None:
    message = str(error)
    assert url.replace(PASSWORD, "***") in message, message
    assert PASSWORD not in message
    assert f"waited {WAIT:g}s" in message and "wait for it to finish" in message


def test_a_locked_events_table_fails_the_write_and_keeps_what_was_committed(
        url: str, locker: psycopg.Connection[tuple[object, ...]]) -> None:
    store = PostgresStore(url, lock_timeout=WAIT)
    try:
        store.append(RUN, created())
        store.flush_sync()
        locker.execute("LOCK TABLE cp_events IN ACCESS EXCLUSIVE MODE")
        store.append(RUN, node_event(2))
        with pytest.raises(StoreLocked) as caught:
            store.flush_sync()
        _check_message(caught.value, url)
        assert "1 events of this process are durable" in str(caught.value)
        with pytest.raises(StoreLocked):  # the store stays failed, with the same error
            store.append(RUN, finished(3))
    finally:
        locker.rollback()
        with pytest.raises(StoreLocked):
            store.close()  # closing reports the failure too
    reopened = PostgresStore(url, lock_timeout=WAIT)
    try:
        assert [e.seq for e in reopened.events(RUN)] == [1]
        assert reopened.run(RUN).status == "running"  # resumable from what was durable
    finally:
        reopened.close()


def test_a_locked_run_row_fails_a_claim(
        url: str, locker: psycopg.Connection[tuple[object, ...]]) -> None:
    store = PostgresStore(url, lock_timeout=WAIT)
    try:
        store.append(RUN, created())
        store.flush_sync()
        locker.execute("SELECT * FROM cp_runs WHERE run_id = %s FOR UPDATE", (RUN,))
        with pytest.raises(StoreLocked) as caught:
            store.claim(RUN, pid=1, host="elsewhere")
        _check_message(caught.value, url)
    finally:
        locker.rollback()
        store.close()


def test_a_migration_held_by_another_session_fails_clearly(
        url: str, locker: psycopg.Connection[tuple[object, ...]]) -> None:
    locker.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
    store = PostgresStore(url, lock_timeout=WAIT)
    try:
        with pytest.raises(StoreLocked) as caught:
            store.append(RUN, created())  # the first write migrates
        _check_message(caught.value, url)
        locker.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))
        store.append(RUN, created())  # nothing was half-applied: it migrates now
        store.flush_sync()
        assert [e.seq for e in store.events(RUN)] == [1]
    finally:
        store.close()


def test_opening_a_database_whose_schema_is_locked_fails_clearly(
        url: str, locker: psycopg.Connection[tuple[object, ...]]) -> None:
    PostgresStore(url).migrate()
    locker.execute("LOCK TABLE cp_migrations IN ACCESS EXCLUSIVE MODE")
    with pytest.raises(StoreLocked) as caught:
        PostgresStore(url, lock_timeout=WAIT)
    _check_message(caught.value, url)
