"""Build-time compatibility checks between annotated step outputs and inputs.

The check is deliberately conservative: it reports a mismatch only when both
ends are annotated with types it understands and they cannot match. Anything it
cannot judge (TypeVars, protocols, forward references to names that are not defined
at run time) passes; an annotation that cannot be evaluated for any other reason is
reported (see :func:`resolved_hints`).
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

from .errors import GraphError

_UNION_TYPES = (typing.Union, types.UnionType)
_NUMERIC_WIDENING = {float: (int,), complex: (int, float)}


def return_type(fn: Callable[..., Any]) -> Any:
    """The resolved return annotation of ``fn``, or ``Any`` when absent or naming something
    undefined (see :func:`resolved_hints`)."""
    hints = resolved_hints(fn)
    return hints.get("return", Any)


def resolved_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """Type hints of ``fn`` (of ``__call__`` for a callable object), forward references resolved.

    Each annotation is evaluated on its own. One that names something undefined at run
    time (a ``NameError``: a name imported only under ``TYPE_CHECKING``, a class local to
    another function) cannot be resolved and is left out, so only the check of that
    parameter is skipped; the others are still checked. Any other failure (an annotation
    string that is not an expression, an attribute a module does not have, a generic that
    rejects its arguments) is a mistake in the annotation and raises :class:`GraphError`
    naming it. A callable without annotations (a builtin, a ``functools.partial``) has
    no hints.
    """
    target: Any = fn if inspect.isroutine(fn) else getattr(fn, "__call__", fn)  # noqa: B004
    annotations = getattr(target, "__annotations__", None)
    if not isinstance(annotations, Mapping) or not annotations:
        return {}
    namespace: Any = target
    while hasattr(namespace, "__wrapped__"):  # where typing.get_type_hints looks, too
        namespace = namespace.__wrapped__
    globalns = getattr(namespace, "__globals__", {})
    hints: dict[str, Any] = {}
    for name, annotation in annotations.items():
        holder = types.SimpleNamespace(__annotations__={name: annotation})
        try:
            hints[name] = typing.get_type_hints(holder, globalns=globalns)[name]
        except NameError:
            continue  # names something undefined at run time: this hint cannot be checked
        except Exception as exc:
            raise GraphError(
                f"the annotation of {_describe(name)} of {_qualname(fn)} ({annotation!r}) "
                f"cannot be evaluated: {type(exc).__name__}: {exc}; fix the annotation") from exc
    return hints


def _describe(name: str) -> str:
    return "the return value" if name == "return" else f"parameter {name!r}"


def _qualname(fn: Any) -> str:
    module = getattr(fn, "__module__", None) or type(fn).__module__
    return f"{module}:{getattr(fn, '__qualname__', None) or type(fn).__qualname__}"


def is_assignable(produced: Any, expected: Any) -> bool:
    """Whether a value of type ``produced`` can be passed where ``expected`` is annotated."""
    if produced is Any or expected is Any or produced is expected:
        return True
    if produced is None:
        produced = type(None)
    if expected is None:
        expected = type(None)
    if isinstance(produced, typing.TypeVar) or isinstance(expected, typing.TypeVar):
        return True
    exp_origin = typing.get_origin(expected)
    prod_origin = typing.get_origin(produced)
    if prod_origin in _UNION_TYPES:
        return all(is_assignable(arm, expected) for arm in typing.get_args(produced))
    if exp_origin in _UNION_TYPES:
        return any(is_assignable(produced, arm) for arm in typing.get_args(expected))
    if exp_origin is typing.Annotated:
        return is_assignable(produced, typing.get_args(expected)[0])
    if prod_origin is typing.Annotated:
        return is_assignable(typing.get_args(produced)[0], expected)
    if prod_origin is typing.Literal:
        return all(is_assignable(type(v), expected) for v in typing.get_args(produced))
    if exp_origin is typing.Literal:
        return True  # a value check, not a type check: leave it to runtime
    if produced is None:
        produced = type(None)
    if expected is None:
        expected = type(None)
    prod_cls = prod_origin or produced
    exp_cls = exp_origin or expected
    if not (isinstance(prod_cls, type) and isinstance(exp_cls, type)):
        return True
    if getattr(exp_cls, "_is_protocol", False):
        return True
    if not (issubclass(prod_cls, exp_cls) or prod_cls in _NUMERIC_WIDENING.get(exp_cls, ())):
        return False
    prod_args, exp_args = typing.get_args(produced), typing.get_args(expected)
    if prod_args and exp_args and len(prod_args) == len(exp_args) and Ellipsis not in exp_args:
        return all(is_assignable(p, e) for p, e in zip(prod_args, exp_args, strict=True))
    return True


def item_type(list_type: Any) -> Any:
    """The element type of an annotated sequence type, or ``Any``."""
    args = typing.get_args(list_type)
    if typing.get_origin(list_type) in (list, tuple, set, frozenset) and args:
        return args[0]
    return Any


def type_name(tp: Any) -> str:
    """A short readable name for an annotation, for error messages."""
    if isinstance(tp, type) and not typing.get_args(tp):
        return tp.__name__
    return repr(tp).replace("typing.", "")
