"""Parallel samples of one model call, kept within the budget, and the pick among them.

``Model.generate(..., samples=N)`` asks the model ``N`` times at once (each sample its
own call, under the model's concurrency limit) and returns the sample :func:`choose`
picks: by default the answer most samples agree on (:func:`vote_key`: the validated
output, else the tool calls, else the text normalised), or the one a score function
rates highest (``pick=lambda generation: score``; ties go to the earliest sample).

Before anything is sent, the bound of each sample is held in the budgets that apply
(:func:`counterpoint.models.budgeting.hold`), as many as fit; when a sample settles for
less than its bound, one more is held and sent if it fits then (up to ``N``). When a
deadline applies, only as many as the time left covers at the model's latency measured
in this run are sent (:func:`deadline_fit`). Fewer than ``N`` is a downgrade to ``k >=
1`` (not even one that fits: :class:`~counterpoint.errors.BudgetExceeded`, as for a
single call), said in the ``model_sampled`` event with the vote.

Each sample has its own seed, derived from the run, the node, the call's purpose and
the sample's number (or the caller's ``seed + i``), and is answered from the run
store's response cache when it was answered before: a node re-run after a crash does
not send again the samples that finished.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic_core import to_jsonable_python

from ..budget import Reservation, remaining
from ..errors import BudgetExceeded, ConfigError, ModelError
from ..events import Event, EventKind
from . import budgeting
from .types import Request, Usage

if TYPE_CHECKING:
    from ..context import NodeContext
    from .call import Generation
    from .config import ModelConfig

Pick = str | Callable[["Generation[Any]"], float]
"""``"majority"`` (the default) or a score function: the highest-scored sample wins."""
PICKS = ("majority",)


@dataclass(frozen=True, kw_only=True, slots=True)
class Sampled:
    """How a sampled call went (:attr:`Generation.sampled`)."""

    requested: int
    sent: int
    """Samples sent: fewer than requested when the budget or the deadline said so."""
    downgraded_by: str | None
    """``budget`` or ``deadline`` when fewer were sent than requested."""
    reason: str
    """``samples downgraded from 5 to 3 by the budget ($0.0300 left covers 3)``, or
    ``5 samples sent``."""
    answered: int
    """Samples that answered (the others failed)."""
    chosen: int
    """The chosen sample's number among those sent, from 0."""
    agree: int
    """Samples whose answer is the chosen one's (by :func:`vote_key`)."""
    pick: str
    """``majority`` or ``score``."""


def check_samples(samples: object, *, where: str) -> int:
    """``samples`` as a whole number >= 1; :class:`ConfigError` naming ``where`` otherwise."""
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise ConfigError(f"{where}: samples must be a whole number >= 1 (the parallel "
                          f"answers to vote among), got {samples!r}")
    return samples


def check_pick(pick: object, *, where: str) -> str:
    """The pick's name (``majority`` or ``score``); :class:`ConfigError` if unknown."""
    if callable(pick):
        return "score"
    if pick in PICKS:
        return str(pick)
    raise ConfigError(f"{where}: pick must be 'majority' or a function scoring a "
                      f"Generation (the highest wins), got {pick!r}")


_SPACE = re.compile(r"\s+")


def normalise(text: str) -> str:
    """An answer as votes compare it: case and spacing folded, surrounding quotes and a
    final full stop dropped."""
    folded = _SPACE.sub(" ", text.strip().casefold())
    return folded.strip("\"'`").rstrip(".").strip()


def vote_key(generation: Generation[Any]) -> str:
    """What makes two samples the same answer: the validated output as canonical JSON,
    else the tool calls (names and arguments), else the normalised text."""
    if generation.output is not None:
        return json.dumps(to_jsonable_python(generation.output), sort_keys=True)
    if generation.tool_calls:
        return json.dumps([[c.name, c.arguments] for c in generation.tool_calls],
                          sort_keys=True)
    return normalise(generation.text)


def choose(generations: Sequence[Generation[Any]], pick: Pick) -> tuple[int, int]:
    """The chosen sample's index and how many samples agree with it. Pure."""
    keys = [vote_key(g) for g in generations]
    if callable(pick):
        scores = [float(pick(g)) for g in generations]
        best = max(range(len(scores)), key=lambda i: (scores[i], -i))
    else:
        counts = {key: keys.count(key) for key in keys}
        best = max(range(len(keys)), key=lambda i: (counts[keys[i]], -keys.index(keys[i])))
    return best, keys.count(keys[best])


def deadline_fit(count: int, *, seconds: float | None, latency: float | None,
                 concurrency: int | None) -> int:
    """How many of ``count`` samples the ``seconds`` left cover, each taking ``latency``
    and ``concurrency`` of them at once (``count`` when either is unknown; at least 1:
    the deadline itself stops what runs past it). Pure."""
    if seconds is None or latency is None or latency <= 0:
        return count
    waves = int(seconds // latency)
    fits = count if concurrency is None else waves * concurrency
    return max(1, min(count, fits if waves else 1))


def downgrade(count: int, *, by_budget: int, by_deadline: int) -> tuple[int, str | None]:
    """How many samples to send and what limited them (``None``: nothing). Pure."""
    sent = min(count, by_budget, by_deadline)
    if sent == count:
        return sent, None
    return sent, "budget" if by_budget <= by_deadline else "deadline"


def seeds(count: int, seed: int | None, ctx: NodeContext | None, purpose: str,
          call: int = 0) -> list[int]:
    """Each sample's seed: ``seed + i`` if the caller gave one, else derived from the run,
    node, purpose and the number of the sampled ``call`` in the node's attempt, so that a
    node resumed after a crash asks (and is cached) the same, call after call; a retry
    after a failed attempt derives new ones (the failed attempt's samples would be
    replayed from the cache otherwise). Pure."""
    if seed is not None:
        return [seed + i for i in range(count)]
    where = f"{ctx.run_id}/{ctx.node}" if ctx is not None else ""
    if ctx is not None and ctx.failed_before:  # a retry after a failure: new samples
        where += f"#{ctx.failed_before}"
    nth = f"/{call}" if call else ""  # (the first call's seeds as they always were)
    return [int(hashlib.sha256(f"{where}/{purpose}{nth}/{i}".encode()).hexdigest()[:8], 16)
            for i in range(count)]


_CALLS: OrderedDict[tuple[str, str, int, str], int] = OrderedDict()
"""Sampled calls made so far by each node's attempt, by purpose (the newest kept)."""
_CALLS_KEPT = 4096
_CALLS_LOCK = threading.Lock()


def call_number(ctx: NodeContext | None, purpose: str) -> int:
    """How many sampled calls with ``purpose`` the calling node's attempt made before this
    one (0 outside a node). A resumed or retried node is a new attempt: it counts from 0
    again, and so asks the samples its interrupted attempt asked."""
    if ctx is None:
        return 0
    key = (str(ctx.run_id), str(ctx.node), ctx.attempt, purpose)
    with _CALLS_LOCK:
        number = _CALLS.get(key, 0)
        _CALLS[key] = number + 1
        _CALLS.move_to_end(key)
        while len(_CALLS) > _CALLS_KEPT:
            _CALLS.popitem(last=False)
    return number


def measured_latency(ctx: NodeContext | None, model: str) -> float | None:
    """Mean seconds of ``model``'s answered calls in the calling run so far (``None``:
    none yet, or outside a run)."""
    return None if ctx is None else ctx.usage.mean_latency(model)  # the log's projection


Ask = Callable[[int, int], Awaitable["Generation[Any]"]]
"""Makes sample ``i`` with seed ``s`` (one call of :meth:`Model.generate`)."""


async def sample(*, count: int, pick: Pick, config: ModelConfig, request: Request,
                 ctx: NodeContext | None, seed: int | None, purpose: str,
                 ask: Ask) -> Generation[Any]:
    """Send the samples that fit, concurrently, and return the chosen one (see the module
    docstring). ``request`` is the first sample's, to bound each; raises the first
    sample's failure when none answered."""
    chosen_seeds = seeds(count, seed, ctx, purpose, call_number(ctx, purpose))
    widest = request.model_copy(update={"seed": max(chosen_seeds)})  # bounds every seed's
    left = remaining()  # before the holds, for the reason's numbers
    held = await budgeting.hold(config, widest, count, ctx)
    by_deadline = deadline_fit(count, seconds=left.seconds,
                               latency=measured_latency(ctx, config.name)
                               if left.seconds is not None else None,
                               concurrency=config.max_concurrency)
    most = min(count, by_deadline)
    for spare in (held or [])[most:]:
        budgeting.release(spare)
    results: list[Generation[Any] | BaseException | None] = []

    async def one(i: int, hold: Reservation | None, group: asyncio.TaskGroup) -> None:
        with budgeting.holding(hold):
            try:
                results[i] = await ask(i, chosen_seeds[i])
            except (ModelError, BudgetExceeded) as exc:
                results[i] = exc
        if ctx is not None:
            await ctx.flush()  # the answer (and its cache entry) durable: never asked again
        # a sample that cost less than its bound left room: one more may fit now
        if held is not None and len(results) < most:
            more = budgeting.hold_more(config, widest, ctx)
            if more is not None:
                launch(more, group)

    def launch(hold: Reservation | None, group: asyncio.TaskGroup) -> None:
        results.append(None)
        group.create_task(one(len(results) - 1, hold, group))

    try:
        async with asyncio.TaskGroup() as group:
            for i in range(most if held is None else min(most, len(held))):
                launch(None if held is None else held[i], group)
    except BaseExceptionGroup as failed:  # not a model's failure (a ConfigError...): as is
        raise failed.exceptions[0] from None
    short = held is not None and len(results) < most  # the budget covered fewer
    sent, limited = downgrade(count, by_budget=len(results) if short else count,
                              by_deadline=by_deadline)
    reason = f"{count} samples sent" if limited is None else \
        f"samples downgraded from {count} to {sent} by the {limited} ({_left(left, sent)})"
    answered = [(i, r) for i, r in enumerate(results)
                if r is not None and not isinstance(r, BaseException)]
    name = check_pick(pick, where=f"model {config.name}")
    data: dict[str, Any] = {"model": config.name, "requested": count, "sent": sent,
                            "downgraded_by": limited, "reason": reason, "pick": name,
                            "answered": len(answered)}
    if not answered:
        if ctx is not None:
            ctx.record(EventKind.MODEL_SAMPLED, {**data, "chosen": None})
        first = results[0]
        assert isinstance(first, BaseException)
        raise first
    index, agree = choose([g for _, g in answered], pick)
    chosen_at, chosen = answered[index]
    if ctx is not None:
        ctx.record(EventKind.MODEL_SAMPLED, {**data, "chosen": chosen_at, "agree": agree})
    usage = sum((g.usage for _, g in answered), Usage())
    return dataclasses.replace(
        chosen, usage=usage, calls=sum(g.calls for _, g in answered),
        cache_hit=all(g.cache_hit for _, g in answered),
        samples=tuple(g for _, g in answered),
        sampled=Sampled(requested=count, sent=sent, downgraded_by=limited, reason=reason,
                        answered=len(answered), chosen=chosen_at, agree=agree, pick=name))


def _left(left: Any, sent: int) -> str:
    parts = []
    if left.usd is not None:
        parts.append(f"${left.usd:.4f} left")
    if left.tokens is not None:
        parts.append(f"{left.tokens:,} tokens left")
    if left.seconds is not None:
        parts.append(f"{left.seconds:.1f}s left")
    return f"{' and '.join(parts) or 'what is left'} covers {sent}"


def sampling_line(data: dict[str, Any]) -> str:
    """One ``model_sampled`` event as the node table shows it: ``3/5 sent (budget),
    majority 2/3``."""
    head = f"{data.get('sent')}/{data.get('requested')} sent"
    if data.get("downgraded_by"):
        head += f" ({data['downgraded_by']})"
    if data.get("chosen") is None:
        return f"{head}, none answered"
    agree = f" {data.get('agree')}/{data.get('answered')}" if data.get("pick") == "majority" \
        else ""
    return f"{head}, {data.get('pick')}{agree}"


def sampling_by_node(events: Iterable[Event]) -> dict[str, dict[str, Any]]:
    """Each node's latest ``model_sampled`` event's data (a projection of the log, for
    ``counterpoint show`` and the run summary)."""
    return {str(e.node): dict(e.data or {}) for e in events
            if e.kind is EventKind.MODEL_SAMPLED and e.node is not None}


__all__ = ["PICKS", "Pick", "Sampled", "call_number", "check_pick", "check_samples", "choose",
           "deadline_fit", "downgrade", "measured_latency", "normalise", "sample",
           "sampling_by_node", "sampling_line", "seeds", "vote_key"]
