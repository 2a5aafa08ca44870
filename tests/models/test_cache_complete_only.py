"""The response cache keeps only complete answers that were read: an answer cut at the
token limit, or one that failed validation, is never replayed to a later call; and a
run's ``RunOptions(cache=False)`` turns the cache off for every call in it."""

from __future__ import annotations

import pydantic

import counterpoint as cp
from counterpoint.models import Model, Response, ScriptedModel, Usage
from counterpoint.store import open_store


class City(pydantic.BaseModel):
    city: str


def _cut(text: str) -> Response:
    return Response(text=text, finish_reason="length", usage=Usage(output_tokens=8, calls=1))


async def test_an_answer_cut_at_the_token_limit_is_not_cached() -> None:
    store = open_store("memory")
    scripted = ScriptedModel([_cut("Lisbon is a city on the"), _cut("Lisbon is a city on the")],
                             name="cut")
    model = Model(scripted)
    first = await model.generate("Describe Lisbon", max_tokens=8, store=store)
    again = await Model(scripted).generate("Describe Lisbon", max_tokens=8, store=store)
    assert first.response.finish_reason == "length" and not first.cache_hit
    assert not again.cache_hit and again.calls == 1  # asked again, not replayed
    assert scripted.remaining == 0


async def test_a_complete_answer_is_cached() -> None:
    store = open_store("memory")
    scripted = ScriptedModel(["Lisbon is the capital of Portugal."], name="whole")
    await Model(scripted).generate("Describe Lisbon", store=store)
    again = await Model(scripted).generate("Describe Lisbon", store=store)
    assert again.cache_hit and again.calls == 0
    assert again.text == "Lisbon is the capital of Portugal."


async def test_an_answer_that_failed_validation_is_not_cached() -> None:
    store = open_store("memory")
    scripted = ScriptedModel(['{"town": "Porto"}', {"city": "Porto"}, '{"town": "Porto"}'],
                             name="invalid")
    first = await Model(scripted).generate("A city?", output=City, store=store)
    assert first.output == City(city="Porto") and first.calls == 2
    # the same first request again: its invalid answer was not kept, so the model is
    # asked (and answers wrongly again); the re-ask is the same request as before, whose
    # valid answer was kept, so it comes from the cache
    second = await Model(scripted).generate("A city?", output=City, store=store)
    assert second.output == City(city="Porto") and second.calls == 1
    assert scripted.remaining == 0


def test_a_run_without_the_cache_asks_every_time() -> None:
    scripted = ScriptedModel(["one", "two"], name="uncached")

    async def ask() -> str:
        return (await Model(scripted).generate("Same question")).text

    def graph() -> cp.Graph:
        g = cp.Graph("twice")
        g.add("ask", ask)
        return g

    store = open_store("memory")
    cached = cp.run_sync(graph(), store=store, options=cp.RunOptions(cache=False))
    fresh = cp.run_sync(graph(), store=store, options=cp.RunOptions(cache=False))
    assert (cached["ask"], fresh["ask"]) == ("one", "two")
    assert scripted.remaining == 0
