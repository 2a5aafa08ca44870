"""The response cache is keyed by what determines the answer: the provider's identity.

Two scripted models are two different models unless they are given the same name;
a configured name is its endpoint and model id, so re-pointing it changes the key.
"""

from __future__ import annotations

from counterpoint.errors import ModelUnavailable
from counterpoint.models import Model, ScriptedModel
from counterpoint.models.openai_compat import OpenAIProvider
from counterpoint.policy import Backoff
from counterpoint.store import MemoryStore

FAST = Backoff(initial=0.01, factor=2.0, maximum=0.05, jitter=0.0)


async def test_two_unnamed_scripted_models_do_not_share_answers() -> None:
    store = MemoryStore()
    first, second = ScriptedModel(["from the first"]), ScriptedModel(["from the second"])
    assert (await Model(first).generate("hi", store=store)).text == "from the first"
    answer = await Model(second).generate("hi", store=store)
    assert (answer.text, answer.cache_hit) == ("from the second", False)
    first.verify()
    second.verify()


async def test_a_fallback_is_not_answered_from_another_models_cache() -> None:
    store = MemoryStore()
    await Model(ScriptedModel(["cached elsewhere"])).generate("hi", store=store)
    failing = ScriptedModel([ModelUnavailable("down", model="scripted")])
    backup = ScriptedModel(["from the backup"])
    result = await Model(failing, fallbacks=[backup], retries=0, backoff=FAST).generate(
        "hi", store=store)
    assert result.text == "from the backup" and not result.cache_hit
    failing.verify()
    backup.verify()


async def test_scripted_models_given_the_same_name_share_the_cache() -> None:
    store = MemoryStore()
    await Model(ScriptedModel(["answer"], name="writer")).generate("hi", store=store)
    again = await Model(ScriptedModel(name="writer")).generate("hi", store=store)
    assert (again.text, again.cache_hit) == ("answer", True)


def test_identity_names_the_endpoint_and_model_not_the_name() -> None:
    one = OpenAIProvider("fast", "qwen", base_url="http://127.0.0.1:9/v1")
    other_name = OpenAIProvider("quick", "qwen", base_url="http://127.0.0.1:9/v1")
    elsewhere = OpenAIProvider("fast", "qwen", base_url="http://127.0.0.1:10/v1")
    other_model = OpenAIProvider("fast", "llama", base_url="http://127.0.0.1:9/v1")
    assert one.identity == other_name.identity
    assert len({one.identity, elsewhere.identity, other_model.identity}) == 3
    assert ScriptedModel().identity != ScriptedModel().identity
    assert ScriptedModel(name="w").identity == ScriptedModel(name="w").identity
