"""JSON encoding of node outputs and errors through pydantic (never pickle)."""

from __future__ import annotations

import inspect
import json
import traceback
from collections.abc import AsyncIterator, Iterator
from functools import lru_cache
from typing import Any

import pydantic
import pydantic_core

from .errors import BudgetExceeded, OutputNotSerializable, RunFailure
from .failures import exception_text, failure_location
from .secrets import redact

_PLAIN = frozenset({str, dict, list, float, bool, tuple})
"""Types of outputs that are certainly not iterators (checked first: the check is cheap)."""


def encode(value: Any) -> str:
    """Encode an output as JSON text; raises :class:`OutputNotSerializable`.

    An iterator (a generator, an open file, ``map(...)``) is refused rather than stored:
    encoding it would consume it, so the log would hold a list while the node's
    dependents got the exhausted iterator.
    """
    kind = type(value)
    if kind is int:
        return str(value)  # exact JSON for any int, and the most common output
    if value is None:
        return "null"
    if kind not in _PLAIN and isinstance(value, Iterator | AsyncIterator):
        raise OutputNotSerializable(
            f"output of type {kind.__name__} is an iterator: storing it would consume it, "
            "and the node's dependents would get it empty; return a list (e.g. "
            "list(...)) or other JSON-compatible data")
    try:
        return pydantic_core.to_json(value).decode()
    except (pydantic_core.PydanticSerializationError, TypeError, ValueError) as exc:
        if inspect.isawaitable(value):
            if inspect.iscoroutine(value):
                value.close()  # never started: no "was never awaited" warning later
            raise OutputNotSerializable(
                f"output of type {type(value).__name__} is an awaitable that was not "
                "awaited: the step returned `f(...)` where it meant `await f(...)`; "
                "await it in the step and return its result") from None
        raise OutputNotSerializable(
            f"output of type {type(value).__name__} cannot be stored as JSON ({exc}); return "
            "JSON-compatible data, a dataclass or a pydantic model") from exc


@lru_cache(maxsize=512)
def _cached_checker(annotation: Any) -> pydantic.TypeAdapter[Any] | None:
    try:
        return pydantic.TypeAdapter(annotation)
    except (pydantic.PydanticSchemaGenerationError, TypeError):  # a class pydantic cannot check
        return None


def _checker(annotation: Any) -> pydantic.TypeAdapter[Any] | None:
    """pydantic's validator of ``annotation`` (made once), or ``None`` for a type it
    cannot check or an annotation that cannot be a cache key."""
    try:
        return _cached_checker(annotation)
    except TypeError:  # unhashable
        return None


def conform(value: Any, annotation: Any) -> Any:
    """``value`` validated as ``annotation`` by pydantic, in its lax mode (``"3"`` for an
    ``int`` is ``3``); ``value`` as it is when ``annotation`` is ``Any`` or a type pydantic
    cannot check. Raises ``ValueError`` with pydantic's reason when ``value`` does not fit."""
    checker = None if annotation is Any or annotation is None else _checker(annotation)
    if checker is None:
        return value
    try:
        return checker.validate_python(value)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        at = ".".join(str(p) for p in first.get("loc", ()))
        raise ValueError(f"{first['msg']}" + (f" (at {at})" if at else "")) from None


def decode(text: str, annotation: Any = Any) -> Any:
    """Decode JSON text written by :func:`encode`, validated as ``annotation`` when known."""
    checker = None if annotation is Any or annotation is None else _checker(annotation)
    if checker is None:
        return json.loads(text)
    try:
        return checker.validate_json(text)
    except (pydantic.ValidationError, TypeError):
        return json.loads(text)


def error_info(exc: BaseException, *, final: bool, retryable: bool,
               retry_in: float | None = None) -> dict[str, Any]:
    """A JSON-compatible description of a failure for the log (secrets redacted)."""
    tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
    info: dict[str, Any] = {  # what the log keeps never holds a configured secret
        "final": final,
        "type": type(exc).__name__,
        "message": redact(exception_text(exc)),
        "retryable": retryable,
        "traceback": redact("".join(tb[-6:])[-4000:]),
    }
    location = failure_location(exc)
    if location is not None:
        info["location"] = {**location, "file": redact(location["file"])}
    if retry_in is not None:
        info["retry_in"] = round(retry_in, 4)
    if isinstance(exc, BudgetExceeded):  # what ran out, for the run's summary
        info["budget"] = exc.as_data()
    if isinstance(exc, RunFailure) and exc.retry_after is not None:
        info["retry_after"] = exc.retry_after
    return info
