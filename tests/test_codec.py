"""counterpoint.codec.encode refuses an output holding an iterator wherever pydantic
would serialize it, naming the path: in plain containers, their subclasses, and the
fields of dataclasses and pydantic models (encoding would consume it while the node's
dependents got the live output, the iterator used up)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any, NamedTuple

import pydantic
import pydantic_core
import pytest

import counterpoint as cp
from counterpoint import codec
from counterpoint.errors import OutputNotSerializable


@dataclasses.dataclass
class Box:
    items: Any
    name: str = "box"


@dataclasses.dataclass(slots=True, frozen=True)
class Slotted:
    inner: Any


class Model(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(arbitrary_types_allowed=True, extra="allow")
    items: Any = None


class Mapping(dict[str, Any]):
    pass


class Items(list[Any]):
    pass


class Pair(NamedTuple):
    left: Any
    right: Any


def numbers() -> Iterator[int]:
    yield from (1, 2, 3)


@pytest.mark.parametrize(("make", "where"), [
    (lambda: Box(items=numbers()), ".items"),
    (lambda: Slotted(inner=Box(items=[1, numbers()])), ".inner.items[1]"),
    (lambda: Model(items=numbers()), ".items"),
    (lambda: Model(extra_field=numbers()), ".extra_field"),
    (lambda: Mapping(rows=numbers()), "['rows']"),
    (lambda: Items([1, numbers()]), "[1]"),
    (lambda: Pair(1, numbers()), "[1]"),
    (lambda: [{"box": Box(items=map(str, [1]))}], "[0]['box'].items"),
    (lambda: {"model": Model(items=Mapping(x=numbers()))}, "['model'].items['x']"),
], ids=["dataclass", "slotted-nested", "pydantic", "pydantic-extra", "dict-subclass",
        "list-subclass", "namedtuple", "dataclass-in-plain", "subclass-in-model"])
def test_an_iterator_in_an_object_is_refused_with_its_path(make: Any, where: str) -> None:
    """Before, only dicts, lists, tuples and sets were looked into: each of these was
    stored as the list the iterator yields, and the dependents read it empty."""
    value = make()
    with pytest.raises(OutputNotSerializable, match=r"output holds an iterator \(\w+\) at "
                                                    + where.replace("[", r"\[")
                                                    .replace("]", r"\]").replace(".", r"\.")
                                                    + ": storing it would consume it"):
        codec.encode(value)


@pytest.mark.parametrize("value", [
    Box(items=[1, 2], name="b"), Slotted(inner={"a": [1]}), Model(items={"k": (1, 2)}),
    Mapping(a=1, b=[Box(items=None)]), Items([1, "x"]), Pair("l", [1]),
])
def test_objects_without_iterators_encode_as_before(value: Any) -> None:
    assert codec.encode(value) == pydantic_core.to_json(value).decode()


def test_an_object_that_holds_itself_is_pydantics_error_to_report() -> None:
    box = Box(items=None)
    box.items = [box]
    with pytest.raises(OutputNotSerializable, match="cannot be stored as JSON"):
        codec.encode(box)


def test_a_dataclass_output_holding_a_generator_fails_the_node() -> None:
    def produce() -> Box:
        return Box(items=numbers())

    def read(box: Box) -> list[int]:
        return list(box.items)

    g = cp.Graph("boxed")
    g.add("read", read, box=g.add("produce", produce))
    result = cp.run_sync(g, store="memory")
    error = result.nodes["produce"].error or {}
    assert error["type"] == "OutputNotSerializable"
    assert "holds an iterator (generator) at .items" in error["message"]
    assert result.nodes["read"].status is cp.NodeStatus.BLOCKED  # never read it empty


def test_a_dataclass_output_without_one_reaches_its_dependent() -> None:
    def produce() -> Box:
        return Box(items=[1, 2, 3])

    def read(box: Box) -> int:
        return sum(box.items)

    g = cp.Graph("boxed")
    g.add("read", read, box=g.add("produce", produce))
    result = cp.run_sync(g, store="memory")
    assert result.ok and result["read"] == 6
    assert json.loads(codec.encode(Box(items=[1]))) == {"items": [1], "name": "box"}
