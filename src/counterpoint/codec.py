"""JSON encoding of node outputs and errors through pydantic (never pickle)."""

from __future__ import annotations

import dataclasses
import inspect
import json
import operator
import traceback
from collections.abc import AsyncIterator, Callable, Iterator
from functools import lru_cache
from typing import Any

import pydantic
import pydantic_core

from .errors import BudgetExceeded, OutputNotSerializable, RunFailure
from .failures import exception_text, failure_location
from .secrets import redact

_PLAIN = frozenset({str, dict, list, float, bool, tuple})
"""Types of outputs that are certainly not iterators (checked first: the check is cheap)."""
_SCALARS = frozenset({str, int, float, bool, type(None), bytes})
_CONTAINERS = frozenset({dict, list, tuple, set, frozenset})
_ITERATOR_ADVICE = ("storing it would consume it, and the node's dependents would get it "
                    "empty; return a list (e.g. list(...)) or other JSON-compatible data")


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
            f"output of type {kind.__name__} is an iterator: {_ITERATOR_ADVICE}")
    if kind not in _SCALARS:  # a container, a dataclass, a pydantic model...
        found = _nested_iterator(value)
        if found is not None:
            where, inner = found
            raise OutputNotSerializable(
                f"output holds an iterator ({type(inner).__name__}) at {where}: "
                f"{_ITERATOR_ADVICE}")
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


_View = Callable[[Any], tuple[Any, bool]]
_VIEWS: dict[type, _View | None] = {}
"""Type -> how to see inside its values (``None``: nothing to see), made once per type."""


def _view(value: Any) -> tuple[Any, bool] | None:
    """What pydantic would serialize inside ``value``, as a plain dict or tuple to walk,
    and whether its keys are field names (shown ``.name`` on a path): a dict's or a list's
    subclass, a dataclass's or a pydantic model's fields; ``None`` for anything else (a
    scalar, an object pydantic cannot store: its error to report)."""
    kind = type(value)
    try:
        view = _VIEWS[kind]
    except KeyError:
        if len(_VIEWS) >= 1024:  # classes made at run time would otherwise pile up
            _VIEWS.clear()
        view = _VIEWS[kind] = _view_of(kind)
    return None if view is None else view(value)


def _view_of(kind: type) -> _View | None:
    if issubclass(kind, dict):
        return lambda value: (dict(value), False)
    if issubclass(kind, list | tuple | set | frozenset):
        return lambda value: (tuple(value), False)
    if issubclass(kind, pydantic.BaseModel):
        def model(value: Any) -> tuple[Any, bool]:
            extra = value.__pydantic_extra__
            return ({**value.__dict__, **extra} if extra else value.__dict__), True
        return model
    if dataclasses.is_dataclass(kind):
        names = tuple(f.name for f in dataclasses.fields(kind))
        if not names:
            return None
        read = operator.attrgetter(*names)
        if len(names) == 1:
            return lambda value: ({names[0]: read(value)}, True)
        return lambda value: (dict(zip(names, read(value), strict=True)), True)
    return None


def _nested_iterator(value: Any) -> tuple[str, Any] | None:
    """The path (``['items'][0]``, ``.field``) and value of the first iterator inside
    ``value``: in its plain containers (dicts, lists, tuples, sets), their subclasses,
    and the fields of its dataclasses and pydantic models, if there is one. Encoding
    would consume it (pydantic writes an iterator as a list) while the live output handed
    to the node's dependents kept it, exhausted. Each container's item types are gathered
    in one pass in C; only containers holding something other than scalars are walked
    item by item, and only their items of other types are looked into (``_view``)."""
    root = (value, False) if type(value) in _CONTAINERS else _view(value)
    if root is None:
        return None
    stack: list[tuple[Any, Any, bool]] = [(root[0], None, root[1])]
    seen = {id(value)}  # a container holding itself is pydantic's error to report
    scalars, containers = _SCALARS, _CONTAINERS
    while stack:  # (container, its path as links, whether its keys are field names)
        current, links, fields = stack.pop()
        is_dict = type(current) is dict
        if scalars.issuperset(map(type, current.values() if is_dict else current)):
            continue
        for key, item in (current.items() if is_dict else enumerate(current)):
            kind = type(item)
            if kind in scalars:
                continue
            if kind in containers:
                if id(item) not in seen:
                    seen.add(id(item))
                    stack.append((item, (links, key, fields), False))
            elif isinstance(item, Iterator | AsyncIterator):
                return _path(links, key, fields), item
            elif id(item) not in seen:
                seen.add(id(item))
                inner = _view(item)
                if inner is not None:
                    stack.append((inner[0], (links, key, fields), inner[1]))
    return None


def _path(links: Any, key: Any, fields: bool) -> str:
    """``['items'][0].name``: the keys from the output down to ``key``."""
    keys = [(key, fields)]
    while links is not None:
        links, parent_key, parent_fields = links
        keys.append((parent_key, parent_fields))
    return "".join(f".{k}" if by_name else f"[{k!r}]" for k, by_name in reversed(keys))


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
