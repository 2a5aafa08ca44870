"""Redaction of secrets (API keys, tokens, passwords) from text before it is shown or stored.

A process-wide registry holds the values to hide: every API key the model layer
reads (from the environment or a key file) or is given, plus, read once on first
use, the values of environment variables named like secrets (``*_API_KEY``,
``*_TOKEN``, ``*SECRET*``, ``*PASSWORD*``). :func:`redact` replaces each occurrence
with ``***``; :func:`redact_data` does the same through dicts, lists and tuples;
:func:`redact_exception` rewrites an exception's message, notes and causes in place.

Values shorter than :data:`MIN_LENGTH` characters are never registered: they would
redact ordinary words. A value is hidden as JSON writes it too (``"`` as ``\\"``, ``é``
as ``\\u00e9``, and again inside JSON text held in JSON), since much of what is shown
or exported is JSON already: a node's output on the web view, a span's messages.
Redaction is a few substring searches per registered form and returns its input
unchanged (the same object) when no secret occurs, so it is cheap enough for every
error and event. All functions are safe to call from any
thread; registering is idempotent.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

__all__ = ["MASK", "MIN_LENGTH", "Redactor", "redact", "redact_data", "redact_exception",
           "register_environment", "register_secret"]

MASK = "***"
MIN_LENGTH = 8
"""Shortest value treated as a secret."""

_SUFFIXES = ("_API_KEY", "_TOKEN")
_INFIXES = ("SECRET", "PASSWORD")

T = TypeVar("T")


def secret_variable(name: str) -> bool:
    """Whether an environment variable's name says it holds a secret."""
    upper = name.upper()
    return upper.endswith(_SUFFIXES) or upper in ("API_KEY", "TOKEN") or \
        any(part in upper for part in _INFIXES)


class Redactor:
    """A set of secret values and the functions that hide them.

    ``environ`` is scanned for variables named like secrets on first use (``None``:
    ``os.environ``; ``{}``: none).
    """

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self._environ = environ
        self._lock = threading.Lock()
        self._values: tuple[str, ...] = ()  # longest first: a secret inside another is hidden
        self._scanned = False

    def register(self, value: str | None) -> None:
        """Hide ``value`` from now on (ignored if shorter than ``MIN_LENGTH``)."""
        self._add((value,) if value else ())

    def register_environment(self, environ: Mapping[str, str] | None = None) -> None:
        """Register the values of variables named like secrets in ``environ``."""
        source = environ if environ is not None else \
            (self._environ if self._environ is not None else os.environ)
        self._add(value for name, value in list(source.items()) if secret_variable(name))

    def _add(self, values: Iterable[str]) -> None:
        fresh = {form for v in values if len(v.strip()) >= MIN_LENGTH
                 for form in _written(v.strip())}
        with self._lock:
            if fresh - set(self._values):
                self._values = tuple(sorted(fresh | set(self._values), key=len, reverse=True))

    def _secrets(self) -> tuple[str, ...]:
        if not self._scanned:
            self._scanned = True  # before scanning: a racing reader may miss it, never loops
            self.register_environment()
        return self._values

    def redact(self, text: str) -> str:
        """``text`` with every registered secret replaced by ``***``."""
        for value in self._secrets():
            if value in text:
                text = text.replace(value, MASK)
        return text

    def redact_data(self, obj: T) -> T:
        """``obj`` with secrets hidden in every string inside dicts, lists and tuples."""
        if not self._secrets():
            return obj
        return self._walk(obj)  # type: ignore[no-any-return]

    def _walk(self, obj: Any) -> Any:
        if isinstance(obj, str):
            return self.redact(obj)
        if isinstance(obj, dict):
            return {self._walk(k): self._walk(v) for k, v in obj.items()}
        if isinstance(obj, list):
            return [self._walk(v) for v in obj]
        if isinstance(obj, tuple):
            return tuple(self._walk(v) for v in obj)
        return obj

    def redact_exception(self, exc: BaseException) -> BaseException:
        """Hide secrets in ``exc``'s message and notes and in its causes, in place."""
        if not self._secrets():
            return exc
        seen: set[int] = set()
        current: BaseException | None = exc
        while current is not None and id(current) not in seen:
            seen.add(id(current))
            current.args = tuple(self.redact(a) if isinstance(a, str) else a
                                 for a in current.args)
            notes = getattr(current, "__notes__", None)
            if isinstance(notes, list):
                notes[:] = [self.redact(n) if isinstance(n, str) else n for n in notes]
            current = current.__cause__ or current.__context__
        return exc


def _written(value: str) -> set[str]:
    """``value`` and the forms JSON gives it: escaped once (in JSON text) and twice (in
    JSON text inside a JSON string, as a tool call's arguments in a stored request), with
    non-ASCII characters kept or escaped. A key or token of plain ASCII letters, digits
    and ``-_.`` has no other form."""
    forms = {value}
    for _ in range(2):
        forms |= {json.dumps(form, ensure_ascii=ascii)[1:-1]
                  for form in forms for ascii in (True, False)}
    return forms


_DEFAULT = Redactor()


def register_secret(value: str) -> None:
    """Hide ``value`` in everything :func:`redact` sees from now on, process-wide."""
    _DEFAULT.register(value)


def register_environment() -> None:
    """Scan ``os.environ`` again for variables named like secrets (done once by itself)."""
    _DEFAULT.register_environment()


def redact(text: str) -> str:
    """``text`` with every registered secret replaced by ``***``."""
    return _DEFAULT.redact(text)


def redact_data(obj: T) -> T:
    """``obj`` with secrets hidden in every string inside dicts, lists and tuples."""
    return _DEFAULT.redact_data(obj)


def redact_exception(exc: BaseException) -> BaseException:
    """Hide secrets in ``exc``'s message, notes and causes, in place; returns ``exc``."""
    return _DEFAULT.redact_exception(exc)
