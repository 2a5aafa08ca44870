"""A call of ``model="auto"``: choose, call, check, escalate; every choice an event.

:func:`route_call` is what :meth:`Model.generate <counterpoint.models.Model.generate>`
runs for a routed model. It learns from the store's finished runs (:func:`.stats_for`),
asks the :class:`~.router.Router` for a model, records the choice as a
``model_routed`` event (model, policy, reason, tags, candidates considered), calls the
model through ``attempt``, and runs the route's output check. When the answer is
invalid structured output, fails the check or the model fails, the call is made again on
a stronger model (a new choice, recorded with ``escalated_from`` and ``failure``), at
most ``Route.escalations`` times; when none is left, a last ``model_routed`` event with
no model says so and :class:`~counterpoint.errors.InvalidOutput` is raised.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import BudgetExceeded, ConfigError, InvalidOutput, ModelError
from ..events import EventKind
from .policies import RouteRequest
from .registry import candidates, stats_for
from .route import BudgetLeft, Route
from .router import Router, check_policy

if TYPE_CHECKING:
    from ..context import NodeContext
    from ..models.call import Generation
    from ..models.config import ModelRegistry
    from ..models.model import Model
    from ..models.types import Message
    from ..store import RunStore

DEFAULT_ANSWER_TOKENS = 1024
"""The answer bound a call without ``max_tokens`` is costed with."""


def router_for(route: Route, registry: ModelRegistry, store: RunStore | None) -> Router:
    """The router of ``route`` over ``registry``'s models, with what ``store`` taught."""
    check_policy(route.policy)
    return Router(candidates=candidates(registry, route.models), policy=route.policy,
                  stats=stats_for(store))


def offered_tags(model: Model) -> tuple[str, ...]:
    """The skill tags the models ``model`` (routed) chooses from are offered for, sorted
    (empty: none declares any, or the configuration cannot be read)."""
    try:
        found = candidates(model.registry, (model.route or Route()).models)
    except ConfigError:
        return ()
    return tuple(sorted({t for c in found for t in c.tags}))


def retagged(model: Model, tags: Sequence[str]) -> Model:
    """``model`` (routed) with ``tags`` added to its route's: a subtask's skills.

    A tag no candidate could be chosen for together with the ones kept before it is left
    out (a planner may name a skill no configured model is offered for), so the tags
    narrow the choice without leaving none. A model that is not routed is returned as is.
    """
    if not model.routed or not tags:
        return model
    route = model.route or Route()
    try:
        found = candidates(model.registry, route.models)
    except ConfigError:
        return model  # the call reports the configuration's problem
    kept = list(route.tags)
    for tag in tags:
        if tag not in kept and any(c.offers([*kept, tag]) for c in found):
            kept.append(tag)
    clone = copy.copy(model)  # a Model holds no per-call state
    clone.route = dataclasses.replace(route, tags=tuple(kept))
    return clone


def prompt_tokens(messages: Sequence[Message], system: str | None,
                  context: Sequence[str]) -> int:
    """About four characters a token, as the rate limiter estimates."""
    chars = sum(len(m.content) for m in messages) + len(system or "") + \
        sum(len(c) for c in context)
    return chars // 4 + 1


def _problem(route: Route, generation: Generation[Any]) -> str | None:
    if route.check is None:
        return None
    verdict = route.check(generation)
    if verdict is None or verdict is True:
        return None
    return verdict if isinstance(verdict, str) and verdict else "the output check failed"


async def route_call(route: Route, registry: ModelRegistry, *, ctx: NodeContext | None,
                     store: RunStore | None, messages: Sequence[Message],
                     system: str | None, context: Sequence[str], max_tokens: int | None,
                     attempt: Callable[[str], Awaitable[Generation[Any]]]
                     ) -> Generation[Any]:
    """Route one call (see the module docstring); ``attempt(name)`` makes it on a model."""
    router = router_for(route, registry, store)
    request = RouteRequest(node=str(ctx.node) if ctx is not None else None, tags=route.tags,
                           prompt_tokens=prompt_tokens(messages, system, context),
                           max_tokens=max_tokens or DEFAULT_ANSWER_TOKENS,
                           budget=route.budget_left(), threshold=route.threshold)
    failures: list[str] = []
    escalated: dict[str, Any] = {}
    for step in range(route.escalations + 2):
        routed = router.choose(request)
        model = routed.choice.model if step <= route.escalations else None
        data = {**routed.data(), "model": model, "tags": list(route.tags), "step": step,
                **escalated}
        if model is None and routed.choice.model is not None:
            data["reason"] = f"{route.escalations} escalation(s) used"
        if ctx is not None:
            ctx.record(EventKind.MODEL_ROUTED, data)
        if model is None:
            break
        try:
            generation = await attempt(model)
        except InvalidOutput as exc:
            failure = {"kind": "invalid_output", "problem": exc.errors or str(exc)}
        except ModelError as exc:
            failure = {"kind": "error", "problem": str(exc)}
        else:
            problem = _problem(route, generation)
            if problem is None:
                return generation
            failure = {"kind": "check", "problem": problem}
        failures.append(f"{model}: {failure['problem']}")
        escalated = {"escalated_from": model, "failure": failure}
        request = RouteRequest(node=request.node, tags=request.tags,
                               prompt_tokens=request.prompt_tokens,
                               max_tokens=request.max_tokens, budget=route.budget_left(),
                               threshold=request.threshold,
                               failed=(*request.failed, model))
    where = f"run {ctx.run_id}, node {ctx.node!r}: " if ctx is not None else ""
    squeezed = [row["model"] for row in routed.considered if row.get("by_budget")]
    if squeezed and routed.choice.model is None:
        left = request.budget
        raise BudgetExceeded(
            f"{where}model auto ({routed.policy}): no model fits the budget left "
            f"({_left_text(left)}); {', '.join(squeezed)} would need more"
            + (f" (tried before: {'; '.join(failures)})" if failures else "")
            + "; raise the budget, lower max_tokens, or add a cheaper model",
            budget=_left_text(left))
    tried = "; ".join(failures) or routed.choice.reason
    raise InvalidOutput(
        f"{where}model auto ({routed.policy}): no routed model passed ({tried}); add a "
        "stronger model (a higher quality = N), allow more escalations, or loosen the check",
        model="auto", errors=tried)


def _left_text(left: BudgetLeft | None) -> str:
    """What a router's budget input says is left, as a person reads it."""
    parts = []
    if left is not None and left.money is not None:
        parts.append(f"${left.money:.6f}")
    if left is not None and left.tokens is not None:
        parts.append(f"{left.tokens:,} tokens")
    if left is not None and left.seconds is not None:
        parts.append(f"{left.seconds:.1f} s")
    return " and ".join(parts) or "no limit"
