"""The page shows what ``model="auto"`` chose in a node's details (real headless chromium,
real OpenAIServer instances on loopback)."""

from __future__ import annotations

from typing import Any

import counterpoint as cp
from counterpoint.models import Model, ModelConfig, ModelRegistry
from counterpoint.store import RunStore
from counterpoint.testing import OpenAIServer, Reply
from counterpoint.ui.server import Server


def test_a_routed_nodes_details_show_its_routing(served: Server, ui_store: RunStore,
                                                 page: Any) -> None:
    with OpenAIServer(default=Reply.text("wrong")) as cheap, \
            OpenAIServer(default=Reply.text("right")) as strong:
        registry = ModelRegistry(models={
            name: ModelConfig(name=name, provider="openai", model=name, base_url=srv.base_url,
                              price_input=p, price_output=p, quality=q, retries=0)
            for name, srv, p, q in (("cheap", cheap, 0.1, 1), ("strong", strong, 5.0, 2))})
        model = Model.auto(check=lambda g: g.text == "right", registry=registry, cache=False)

        async def ask() -> str:
            return (await model.generate("Answer", max_tokens=8)).text

        g = cp.Graph("routed")
        g.add("ask", ask)
        run = cp.run_sync(g, store=ui_store)
    assert run.ok
    page.goto(f"{served.base}/runs/{run.run_id}?node=ask")
    page.wait_for_selector("#detail >> text=routing")
    text = page.inner_text("#detail p.routing")
    assert text.startswith("cheap ✗check → strong (cheapest_that_passes, 1 escalation")
