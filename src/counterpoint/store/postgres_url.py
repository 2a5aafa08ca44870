"""PostgreSQL store URLs: telling one from a path, checking it, hiding its password, and
what a driver error means for the user.

A URL may carry a password (``postgresql://user:secret@host/db``), but it is never
shown: :func:`redact` replaces it with ``***`` in every message and in the store's
:attr:`~counterpoint.store.RunStore.location`. The place for a password is the
``PGPASSWORD`` variable or ``~/.pgpass``, which libpq reads itself.
"""

from __future__ import annotations

import urllib.parse
from typing import TYPE_CHECKING, Any

from ..errors import StoreError, StoreLocked

if TYPE_CHECKING:
    import psycopg

SCHEMES = ("postgresql://", "postgres://")
"""How a store location names a PostgreSQL database rather than a SQLite file."""
_PASSWORD_HINT = ("pass the password in PGPASSWORD or ~/.pgpass (not in the URL, where "
                  "it could be seen)")


def is_postgres_url(location: str) -> bool:
    """Whether ``location`` names a PostgreSQL database."""
    return location.startswith(SCHEMES)


def redact(url: str) -> str:
    """``url`` with its password, if any (``USER:SECRET@`` or ``?password=SECRET``),
    replaced by ``***``."""
    return _rewrite(url, "***")


def without_password(url: str) -> str:
    """``url`` with its password, if any, left out: what a command line shown to the user
    names (libpq then reads the password from ``PGPASSWORD`` or ``~/.pgpass``)."""
    return _rewrite(url, None)


def _rewrite(url: str, mask: str | None) -> str:
    """``url`` with each password in it (user info or the query's ``password``) replaced
    by ``mask``, or left out when ``mask`` is ``None``."""
    try:
        parts = urllib.parse.urlsplit(url)
        password = parts.password
    except ValueError:
        return url.split("@", 1)[-1] if "@" in url else url
    if password:
        user = parts.username or ""
        host = parts.netloc.rsplit("@", 1)[1]
        login = f"{user}:{mask}" if mask is not None else user
        parts = parts._replace(netloc=f"{login}@{host}" if login else host)
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    if any(key == "password" for key, _ in query):
        kept = [(key, mask if key == "password" else value) for key, value in query
                if mask is not None or key != "password"]
        parts = parts._replace(query=urllib.parse.urlencode(kept, safe="*/"))
    elif not password:  # nothing to hide: as given ("postgres://" would come back
        return url      # as "postgres:")
    return urllib.parse.urlunsplit(parts)


def _passwords(url: str) -> list[str]:
    """The passwords ``url`` holds, in its user info and its query."""
    try:
        parts = urllib.parse.urlsplit(url)
        found = [parts.password] if parts.password else []
    except ValueError:
        return []
    return found + [value for key, value in urllib.parse.parse_qsl(parts.query)
                    if key == "password" and value]


def check(url: str) -> str:
    """``url`` if libpq can read it; else :class:`StoreError` naming what is wrong."""
    from psycopg import conninfo

    shown = redact(url)
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as exc:
        raise StoreError(f"store {shown}: not a valid PostgreSQL URL ({exc}); write it as "
                         "postgresql://USER@HOST:PORT/DATABASE") from None
    if not parts.path.strip("/") and "dbname" not in parts.query:
        raise StoreError(f"store {shown}: the URL names no database; write it as "
                         "postgresql://USER@HOST:PORT/DATABASE")
    try:
        conninfo.conninfo_to_dict(url)
    except Exception as exc:  # psycopg.ProgrammingError: libpq could not parse it
        message = " ".join(_hide(str(exc), url).split())  # libpq's ends in a newline
        raise StoreError(f"store {shown}: not a valid PostgreSQL URL ({message}); write it "
                         "as postgresql://USER@HOST:PORT/DATABASE") from None
    return url


def _hide(message: str, url: str) -> str:
    for password in _passwords(url):
        message = message.replace(password, "***")
    return message


def explain(url: str, exc: BaseException, *, lock_timeout: float) -> StoreError:
    """What ``exc``, raised by psycopg while using the store at ``url``, means for the
    user, as a :class:`StoreError` that never holds the password."""
    import psycopg

    where = f"store {redact(url)}"
    message = _hide(" ".join(str(exc).split()), url)
    if isinstance(exc, psycopg.errors.LockNotAvailable | psycopg.errors.QueryCanceled):
        return StoreLocked(f"{where}: the database is locked by another process (waited "
                           f"{lock_timeout:g}s); wait for it to finish or use another --db")
    if isinstance(exc, psycopg.OperationalError):
        return _connection_error(where, message)
    if isinstance(exc, psycopg.errors.InsufficientPrivilege):
        return StoreError(f"{where}: the user lacks a privilege counterpoint needs "
                          f"({message}); grant it, or connect as the database's owner")
    return StoreError(f"{where}: PostgreSQL refused the request ({message})")


def _connection_error(where: str, message: str) -> StoreError:
    low = message.lower()
    if "password authentication failed" in low or "no password supplied" in low:
        return StoreError(f"{where}: the server refused the login ({message}); check the "
                          f"user, and {_PASSWORD_HINT}")
    if "does not exist" in low and "database" in low:
        return StoreError(f"{where}: the database does not exist ({message}); create it "
                          "with `createdb -h HOST -U USER DATABASE`")
    if "role" in low and "does not exist" in low:
        return StoreError(f"{where}: the server knows no such user ({message}); create it "
                          "with `createuser` or name another user in the URL")
    if any(part in low for part in ("connection refused", "could not connect",
                                    "no such file", "timeout expired", "could not translate",
                                    "connection to server", "server closed")):
        return StoreError(f"{where}: cannot reach the PostgreSQL server ({message}); check "
                          "that it runs and that the URL's host and port are right")
    return StoreError(f"{where}: the connection failed ({message})")


def connect(url: str, *, lock_timeout: float, connect_timeout: float = 10.0,
            autocommit: bool = False) -> psycopg.Connection[tuple[Any, ...]]:
    """A connection to ``url`` with the store's settings (a lock wait of at most
    ``lock_timeout`` seconds); a failure is :func:`explain`-ed."""
    import psycopg

    try:
        return psycopg.connect(url, autocommit=autocommit,
                               connect_timeout=max(1, int(connect_timeout)),
                               options=f"-c lock_timeout={int(lock_timeout * 1000)}",
                               application_name="counterpoint")
    except psycopg.Error as exc:
        raise explain(url, exc, lock_timeout=lock_timeout) from None
