"""What the graph builder works out once and remembers: step callables' facts, call sites.

:func:`step_facts` returns a callable's parameters, the parameter that receives the
node context, whether it is async, its step key and its resolved type hints. Working
these out costs tens of microseconds (``inspect.signature``, ``typing.get_type_hints``),
and a large graph adds the same few steps many thousands of times, so the answer is
cached per callable object.

The cache holds callables weakly, by identity: an entry goes when its callable is
garbage-collected, and callables that cannot be hashed are cached all the same. A bound
method is a new object at every attribute access, so its facts are cached under its
function (every method bound to that function has the same signature, hints and key).
Callables that cannot be weakly referenced are not cached. The facts are taken when a
callable is first added: changing its ``__signature__`` or annotations later is not seen.

:func:`call_site` gives the ``file:line`` a node was added at, remembered per call site
the same way (weakly, per code object).
"""

from __future__ import annotations

import functools
import inspect
import types
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import CodeType, FrameType
from typing import Any

from .annotations import resolved_hints

_VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


@dataclass(frozen=True, kw_only=True, slots=True)
class StepFacts:
    """The facts about one step callable that building a node needs."""

    params: Mapping[str, inspect.Parameter] | None
    """The signature's parameters; ``None`` when the callable has no readable signature
    (its inputs are then not checked)."""
    names: tuple[str, ...]
    """Parameter names other than ``*args`` and ``**kwargs``, in order."""
    takes_kwargs: bool
    """Whether it has a ``**kwargs`` parameter (then any input name is accepted)."""
    required: tuple[str, ...]
    """Parameters without a default, other than variadic ones and the context parameter."""
    required_set: frozenset[str]
    """``required`` as a set."""
    accepted: frozenset[str]
    """The names an input may have, unless it takes ``**kwargs``: the parameters' names
    other than the context parameter's."""
    positional_only: str | None
    """The first positional-only parameter other than the context parameter, if any."""
    context_param: str | None
    """The parameter that receives the :class:`~counterpoint.context.NodeContext`."""
    is_async: bool
    """Whether calling it returns a coroutine (an ``async def`` function or ``__call__``)."""
    key: str
    """``module:qualname``, as :func:`counterpoint.graph.step_key` gives it."""
    hints: Mapping[str, Any]
    """Resolved type hints; hints that name something undefined at run time are left out."""
    returns: Any
    """The resolved return annotation, or ``Any``."""


_Entry = tuple["weakref.ref[Any]", StepFacts]
_FACTS: dict[int, _Entry] = {}
"""``id(callable)`` -> (weak reference to the callable, its facts)."""
_METHOD_FACTS: dict[int, _Entry] = {}
"""``id(function)`` -> (weak reference to it, the facts of the methods bound to it)."""


NO_FACTS = StepFacts(params=None, names=(), takes_kwargs=True, required=(),
                     required_set=frozenset(), accepted=frozenset(), positional_only=None,
                     context_param=None, is_async=True, key="", hints={}, returns=Any)
"""Stands in for a sub-graph, which has no signature: no check applies."""


def step_facts(fn: Callable[..., Any]) -> StepFacts:
    """The facts about ``fn``, from the cache when ``fn`` was seen before.

    Raises :class:`~counterpoint.errors.GraphError` when one of ``fn``'s annotations
    cannot be evaluated for a reason other than naming something undefined.
    """
    entry = _FACTS.get(id(fn))
    if entry is not None and entry[0]() is fn:
        return entry[1]
    if type(fn) is types.MethodType:
        owner, cache = fn.__func__, _METHOD_FACTS
        entry = cache.get(id(owner))
        if entry is not None and entry[0]() is owner:
            return entry[1]
    else:
        owner, cache = fn, _FACTS
    facts = _work_out(fn)
    key = id(owner)
    try:
        ref = weakref.ref(owner, functools.partial(_forget, cache, key))
    except TypeError:  # cannot be weakly referenced (__slots__ without __weakref__)
        return facts
    cache[key] = (ref, facts)
    return facts


def _forget(cache: dict[int, _Entry], key: int, dead: weakref.ref[Any]) -> None:
    entry = cache.get(key)
    if entry is not None and entry[0] is dead:  # not an entry made since for a new object
        del cache[key]


def _work_out(fn: Callable[..., Any]) -> StepFacts:
    module = getattr(fn, "__module__", None) or type(fn).__module__
    qualname = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None))  # noqa: B004
    hints = resolved_hints(fn)
    try:
        params: Mapping[str, inspect.Parameter] | None = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # builtins and the like without a readable signature
        params = None
    if params is None:
        return StepFacts(params=None, names=(), takes_kwargs=False, required=(),
                         required_set=frozenset(), accepted=frozenset(), positional_only=None,
                         context_param=None, is_async=is_async, key=f"{module}:{qualname}",
                         hints=hints, returns=hints.get("return", Any))
    context = None
    for name in params:
        if getattr(hints.get(name), "__name__", None) == "NodeContext" or name == "ctx":
            context = name
            break
    names = tuple(n for n, p in params.items() if p.kind not in _VARIADIC)
    positional_only = next((n for n in names if n != context
                            and params[n].kind is inspect.Parameter.POSITIONAL_ONLY), None)
    required = tuple(n for n in names
                     if n != context and params[n].default is inspect.Parameter.empty)
    return StepFacts(
        params=params, names=names,
        takes_kwargs=any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()),
        required=required, required_set=frozenset(required),
        accepted=frozenset(params) - {context}, positional_only=positional_only,
        context_param=context,
        is_async=is_async, key=f"{module}:{qualname}", hints=hints,
        returns=hints.get("return", Any))


# --------------------------------------------------------------------------- call sites
_CALL_SITES: dict[int, tuple[weakref.ref[CodeType], dict[int, str]]] = {}
"""``id(code)`` -> (weak reference to the code, its instruction offset -> ``file:line``)."""


def call_site(frame: FrameType) -> str:
    """``file:line`` of the instruction ``frame`` is at.

    Remembered per call site: a frame's line number is worked out by reading its code's
    line table from the start, which made up a tenth of the cost of ``Graph.add``, and a
    graph is usually built by a few lines called many times.
    """
    code = frame.f_code
    known = _CALL_SITES.get(id(code))
    if known is None or known[0]() is not code:
        known = (weakref.ref(code, functools.partial(_forget_code, id(code))), {})
        _CALL_SITES[id(code)] = known
    sites = known[1]
    where = sites.get(frame.f_lasti)
    if where is None:
        where = sites[frame.f_lasti] = f"{code.co_filename}:{frame.f_lineno}"
    return where


def _forget_code(key: int, dead: weakref.ref[CodeType]) -> None:
    known = _CALL_SITES.get(key)
    if known is not None and known[0] is dead:
        del _CALL_SITES[key]
