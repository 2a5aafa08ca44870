"""Resolving step annotations: unresolvable names skip one check, broken annotations raise."""

from __future__ import annotations

import typing
from typing import TYPE_CHECKING, Any

import pytest

import counterpoint as cp
from counterpoint.annotations import resolved_hints, return_type

if TYPE_CHECKING:
    from decimal import Decimal  # only for the type checker: undefined at run time


async def text() -> str:
    return "x"


async def half_resolvable(amount: Decimal, n: int) -> int:
    return n


async def not_an_expression(n: "an integer, please") -> int:  # type: ignore[name-defined]  # noqa: F722
    return 0


async def missing_attribute(n: typing.Intger) -> int:  # type: ignore[name-defined]
    return 0


async def bad_return(n: int) -> typing.Optional[int, str]:  # type: ignore[valid-type]  # noqa: UP045
    return []


def test_a_name_undefined_at_run_time_skips_only_its_own_hint() -> None:
    hints = resolved_hints(half_resolvable)
    assert hints == {"n": int, "return": int}  # "amount" names Decimal, not imported
    assert return_type(half_resolvable) is int


def test_the_other_hints_are_still_checked() -> None:
    g = cp.Graph("g")
    t = g.add("t", text)
    g.add("ok", half_resolvable, amount=t, n=g.add("i", half_resolvable, amount=1, n=1))
    with pytest.raises(cp.GraphError, match=r"input 'n' expects int but node 't' returns str"):
        g.add("bad", half_resolvable, amount=1, n=t)


@pytest.mark.parametrize(("fn", "what", "error"), [
    (not_an_expression, "parameter 'n'", "SyntaxError"),
    (missing_attribute, "parameter 'n'", "AttributeError"),
    (bad_return, "the return value", "TypeError"),
])
def test_an_annotation_that_cannot_be_evaluated_is_a_graph_error(fn: Any, what: str,
                                                                  error: str) -> None:
    with pytest.raises(cp.GraphError, match=rf"the annotation of {what} of "
                                            rf"\S+:{fn.__name__} \(.*\) cannot be evaluated: "
                                            rf"{error}: "):
        resolved_hints(fn)
    g = cp.Graph("g")
    with pytest.raises(cp.GraphError, match=rf"test_annotations.py:\d+: graph 'g', node 'x': "
                                            rf"the annotation of {what}"):
        g.add("x", fn, n=1)


def test_callables_without_annotations_have_no_hints() -> None:
    import functools

    assert resolved_hints(len) == {}
    assert resolved_hints(functools.partial(text)) == {}
    assert resolved_hints(lambda x: x) == {}


def test_callable_objects_use_their_call_annotations() -> None:
    class Counter:
        async def __call__(self, text: str) -> int:
            return len(text)

    assert resolved_hints(Counter()) == {"text": str, "return": int}
