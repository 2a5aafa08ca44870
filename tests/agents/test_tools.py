"""``@tool``: schemas from type hints and docstrings, argument validation, how tools run."""

from __future__ import annotations

import asyncio
import inspect
import threading
from typing import Any

import pytest
from pydantic import BaseModel

import counterpoint as cp
from counterpoint.agents import Agent, Tool, ToolError, tool
from counterpoint.agents.tools import from_function
from counterpoint.errors import RunFailure, UserError
from counterpoint.models import ScriptedModel


class Address(BaseModel):
    street: str
    city: str


# ------------------------------------------------------------------ schemas
def test_schema_from_hints_and_a_google_docstring() -> None:
    @tool
    def weather(city: str, days: int, metric: bool = True) -> str:
        """Forecast for a city.

        Longer explanation the model does not need.

        Args:
            city: The city's name, in English.
            days (int): How many days ahead,
                from 1 to 7.
            metric: Celsius if true.

        Returns:
            The forecast as text.
        """
        return city

    assert weather.name == "weather"
    assert weather.description == "Forecast for a city."
    assert weather.parameters == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "The city's name, in English."},
            "days": {"type": "integer", "description": "How many days ahead, from 1 to 7."},
            "metric": {"type": "boolean", "default": True, "description": "Celsius if true."}},
        "required": ["city", "days"],
        "additionalProperties": False}
    assert weather.spec.name == "weather" and weather.spec.parameters == weather.parameters


def test_schema_from_a_sphinx_docstring() -> None:
    @tool
    def search(query: str, limit: int = 10) -> list[str]:
        """Search the web.
        :param query: What to look for,
            as keywords.
        :param int limit: At most this many results.
        :returns: Titles.
        """
        return []

    assert search.description == "Search the web."
    props = search.parameters["properties"]
    assert props["query"]["description"] == "What to look for, as keywords."
    assert props["limit"]["description"] == "At most this many results."
    assert search.parameters["required"] == ["query"]


def test_summary_spans_lines_and_stops_at_a_section() -> None:
    @tool
    def f(x: int) -> int:
        """Do a thing
        over two lines.
        Args:
            x: The thing.
        """
        return x

    assert f.description == "Do a thing over two lines."
    assert f.parameters["properties"]["x"]["description"] == "The thing."

    def g(x: int) -> int:
        return x

    assert tool(g).description == "g"  # no docstring: the name
    described = tool(name="renamed", description="Explicit.")(g)
    assert (described.name, described.description) == ("renamed", "Explicit.")


def test_optional_parameters_and_defaults() -> None:
    @tool
    def find(name: str, tag: str | None = None, limit: int = 3,
             kinds: list[str] | None = None) -> dict[str, Any]:
        return {"name": name, "tag": tag, "limit": limit, "kinds": kinds}

    schema = find.parameters
    assert schema["required"] == ["name"]
    assert schema["properties"]["limit"] == {"type": "integer", "default": 3}
    assert schema["properties"]["tag"]["default"] is None
    assert asyncio.run(find.call({"name": "a"})) == {"name": "a", "tag": None, "limit": 3,
                                                     "kinds": None}
    assert asyncio.run(find.call({"name": "a", "limit": "7", "kinds": ["x"]}))["limit"] == 7


async def test_pydantic_model_parameters() -> None:
    received: list[Any] = []

    @tool
    def ship(to: Address, note: str = "") -> str:
        """Ship a parcel."""
        received.append(to)
        return to.city

    defs = ship.parameters["$defs"]
    assert defs["Address"]["required"] == ["street", "city"]
    assert ship.parameters["properties"]["to"] == {"$ref": "#/$defs/Address"}
    assert await ship.call({"to": {"street": "1 rue X", "city": "Lyon"}}) == "Lyon"
    assert received == [Address(street="1 rue X", city="Lyon")]
    with pytest.raises(ToolError, match=r"tool ship: .*to\.city: Field required"):
        await ship.call({"to": {"street": "1 rue X"}})


def test_parameter_names_pydantic_reserves_still_work() -> None:
    @tool
    def odd(json: str, schema: int, _private: bool = False) -> list[Any]:
        return [json, schema, _private]

    assert set(odd.parameters["properties"]) == {"json", "schema", "_private"}
    assert asyncio.run(odd.call({"json": "j", "schema": 2, "_private": True})) == \
        ["j", 2, True]


# --------------------------------------------------------------- running
async def test_a_sync_tool_runs_in_a_worker_thread_and_an_async_one_on_the_loop() -> None:
    threads: dict[str, int] = {}

    @tool
    def blocking(x: int) -> int:
        threads["sync"] = threading.get_ident()
        return x + 1

    @tool
    async def nonblocking(x: int) -> int:
        threads["async"] = threading.get_ident()
        await asyncio.sleep(0)
        return x + 2

    assert await blocking.call({"x": 1}) == 2
    assert await nonblocking(x=1) == 3  # calling the tool directly, by keyword
    assert threads["async"] == threading.get_ident()
    assert threads["sync"] != threading.get_ident()


async def test_callable_objects_are_tools_too() -> None:
    class Counter:
        __name__ = "count"

        async def __call__(self, step: int) -> int:
            return step * 2

    counter = from_function(Counter())
    assert counter.name == "count" and counter.parameters["required"] == ["step"]
    assert await counter.call({"step": 4}) == 8


async def test_invalid_arguments_are_a_tool_error_naming_tool_and_field() -> None:
    @tool
    def add(a: int, b: int) -> int:
        return a + b

    with pytest.raises(ToolError) as caught:
        await add.call({"a": "one", "b": 2})
    message = str(caught.value)
    assert "tool add" in message and "a:" in message and "integer" in message
    with pytest.raises(ToolError, match=r"tool add: b: Field required"):
        await add.call({"a": 1})
    with pytest.raises(ToolError, match=r"tool add: c: Extra inputs are not permitted"):
        await add.call({"a": 1, "b": 2, "c": 3})
    assert isinstance(caught.value, RunFailure) and not caught.value.retryable


async def test_a_ctx_parameter_gets_the_node_context_and_is_not_in_the_schema() -> None:
    seen: list[Any] = []

    @tool
    async def where(label: str, ctx: cp.NodeContext | None = None) -> str:
        seen.append(ctx)
        return label

    assert list(where.parameters["properties"]) == ["label"]
    assert await where.call({"label": "outside"}) == "outside" and seen == [None]

    async def node() -> str:
        return str(await where.call({"label": "inside"}))

    g = cp.Graph("ctx-tool")
    g.add("n", node)
    result = await cp.run(g, store="memory")
    assert result.ok
    assert seen[1] is not None and seen[1].node == "n"


# ---------------------------------------------------------------- misuse
def test_a_parameter_without_a_hint_is_a_user_error_naming_file_and_line() -> None:
    def untyped(city, days: int) -> str:  # type: ignore[no-untyped-def]
        return str(city)

    line = inspect.getsourcelines(untyped)[1]
    with pytest.raises(UserError) as caught:
        tool(untyped)
    message = str(caught.value)
    assert f"{__file__}:{line}" in message
    assert "untyped" in message and "'city'" in message and "no type hint" in message


def test_unresolvable_hints_and_positional_only_parameters_are_user_errors() -> None:
    def dangling(x: Missing) -> int:  # type: ignore[name-defined]  # noqa: F821
        return 1

    with pytest.raises(UserError, match="cannot resolve its type hints"):
        tool(dangling)

    def positional(x: int, /) -> int:
        return x

    with pytest.raises(UserError, match="positional-only"):
        tool(positional)


async def test_idempotency_key_needs_side_effects_and_is_passed_not_asked() -> None:
    def send(to: str, idempotency_key: str | None = None) -> str:
        return f"{to}:{idempotency_key}"

    with pytest.raises(UserError, match=r"idempotency_key .*side_effects=True"):
        tool(send)
    sender = tool(side_effects=True)(send)
    assert sender.side_effects and sender.takes_key
    assert list(sender.parameters["properties"]) == ["to"]
    assert await sender.call({"to": "ann"}, key="k1") == "ann:k1"
    with pytest.raises(ToolError, match="idempotency_key: Extra inputs"):
        await sender.call({"to": "ann", "idempotency_key": "forged"})


@pytest.mark.parametrize("bad", ["", "has space", "dots.not.allowed", "x" * 65, "é"])
def test_tool_names_are_checked(bad: str) -> None:
    def fine(x: int) -> int:
        return x

    with pytest.raises(UserError, match="must be 1-64 letters, digits, _ or -"):
        tool(name=bad)(fine)


def test_every_tool_kind_checks_its_name() -> None:
    async def runner(arguments: dict[str, Any]) -> Any:
        return arguments

    with pytest.raises(UserError, match="tool name 'a b'"):
        Tool(name="a b", description="", parameters={}, runner=runner)
    spaced = Agent("code reviewer", model=ScriptedModel())
    with pytest.raises(UserError, match=r"tool name 'code reviewer'.*name="):
        spaced.as_tool()
    assert spaced.as_tool(name="reviewer").name == "reviewer"
    g = cp.Graph("my graph")
    g.add("n", lambda: 1)
    with pytest.raises(UserError, match="tool name 'my graph'"):
        Agent("uses", model=ScriptedModel(), tools=[g])


def test_two_tools_with_one_name_are_a_user_error() -> None:
    def a(x: int) -> int:
        return x

    with pytest.raises(UserError, match=r"two tools are called \['a'\]"):
        Agent("dup", model=ScriptedModel(), tools=[a, tool(a)])
