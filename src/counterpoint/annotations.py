"""Build-time compatibility checks between annotated step outputs and inputs.

The check is deliberately conservative: it reports a mismatch only when both
ends are annotated with types it understands and they cannot match. Anything it
cannot judge (TypeVars, protocols, forward references) passes.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable
from typing import Any

_UNION_TYPES = (typing.Union, types.UnionType)
_NUMERIC_WIDENING = {float: (int,), complex: (int, float)}


def return_type(fn: Callable[..., Any]) -> Any:
    """The resolved return annotation of ``fn``, or ``Any`` when absent or unresolvable."""
    hints = resolved_hints(fn)
    return hints.get("return", Any)


def resolved_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """Type hints of ``fn`` with forward references resolved; ``{}`` if they cannot be."""
    target: Any = fn if inspect.isroutine(fn) else getattr(fn, "__call__", fn)  # noqa: B004
    try:
        return typing.get_type_hints(target)
    except Exception:
        return {}


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
