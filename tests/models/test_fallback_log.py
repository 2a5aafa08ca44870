"""A fallback chain against two real servers: the first fails past its retries, the
second answers; every model_call says which model and which endpoint it went to,
failed attempts included, and the usage names the model that answered."""

from __future__ import annotations

import counterpoint as cp
from counterpoint.events import EventKind
from counterpoint.models import Model, ModelConfig, ModelRegistry
from counterpoint.policy import Backoff
from counterpoint.testing import OpenAIServer, Reply

FAST = Backoff(initial=0.01, factor=2.0, maximum=0.05, jitter=0.0)


async def test_failed_attempts_name_their_endpoint_and_the_fallback_that_answered() -> None:
    with OpenAIServer([Reply.status(500)] * 2) as first, \
            OpenAIServer([Reply.text("from b")]) as second:
        configs = {name: ModelConfig(name=name, provider="openai", model=name,
                                     base_url=server.base_url, retries=1)
                   for name, server in (("a", first), ("b", second))}
        model = Model("a", fallbacks=["b"], cache=False, backoff=FAST,
                      registry=ModelRegistry(models=configs))

        async def ask() -> str:
            answer = await model.generate("Say ok", max_tokens=16)
            return f"{answer.model}: {answer.text}"

        g = cp.Graph("fallback")
        g.add("ask", ask)
        store = cp.MemoryStore()
        result = await cp.run(g, store=store)
    assert result.outputs["ask"] == "b: from b"
    calls = [e.data for e in store.events(result.run_id)
             if e.kind is EventKind.MODEL_CALL and e.data]
    assert [(c["model"], c.get("endpoint"), "error" in c) for c in calls] == [
        ("a", first.base_url, True), ("a", first.base_url, True),
        ("b", second.base_url, False)]
    assert result.usage.failed == 2 and result.usage.calls == 1
