"""A model call's reservation in the budgets that apply, and its settlement.

Before an attempt is sent, :func:`reserve` bounds its cost: the prompt's tokens (at
most one per byte of the request as JSON, a bound for byte-level tokenizers) plus the
answer's ``max_tokens`` (the request's, else the model's ``max_output_tokens``, else
:data:`DEFAULT_ANSWER_BOUND`, which is then sent as the request's ``max_tokens`` so that
the provider enforces it), priced at the model's prices. The reservation is recorded
(``budget_reserved``) and made durable before the call is sent; :func:`settle` replaces
it by the real usage, and the ``model_call`` event names it. See :mod:`counterpoint.budget`.

Parallel samples (:mod:`.sampling`) first :func:`hold` the bound of each sample, as many
as fit; a sample's call then exchanges its hold for its own reservation (:func:`holding`),
so that no other call takes the room in between.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from ..budget import ZERO, Amount, Ledger, Reservation, current_ledger
from ..errors import BudgetExceeded, ModelError, UnpricedModel
from ..events import EventKind
from .config import ModelConfig
from .types import Request, Usage

if TYPE_CHECKING:
    from ..context import NodeContext

DEFAULT_ANSWER_BOUND = 4096
"""Answer tokens reserved (and asked for) when neither the call nor the model sets any."""

_HELD: ContextVar[Reservation | None] = ContextVar("counterpoint_held", default=None)
"""The room a sample's task holds for its first call (see :func:`holding`)."""


def prompt_bound(request: Request) -> int:
    """At most how many tokens the request's prompt is: its JSON's bytes (every token of
    a byte-level tokenizer is at least one byte; the JSON adds to the text, never less)."""
    return len(request.model_dump_json(by_alias=True).encode())


def bound(config: ModelConfig, request: Request) -> Amount:
    """The most ``request`` can cost on ``config``'s model (``request.max_tokens`` set)."""
    answer = request.max_tokens or 0
    prompt = prompt_bound(request)
    usd = 0.0
    if config.priced:
        assert config.price_input is not None and config.price_output is not None
        usd = (prompt * config.price_input + answer * config.price_output) / 1e6
    return Amount(usd, prompt + answer)


async def reserve(config: ModelConfig, request: Request, ctx: NodeContext | None,
                  ) -> tuple[Request, Reservation | None]:
    """The request to send (with its answer bounded) and its reservation, once it fits;
    ``None`` when no budget applies. Raises :class:`~counterpoint.errors.BudgetExceeded`
    when it cannot fit, :class:`~counterpoint.errors.UnpricedModel` when a money budget
    applies and the model has no price."""
    ledger = current_ledger()
    if ledger is None or not ledger.limited:
        return request, None
    what = _what(config, ledger, ctx)
    request = bounded(config, request)
    amount = bound(config, request)
    held = _HELD.get()
    if held is not None:  # a sample's room: given back just before this call takes its own
        _HELD.set(None)
        ledger.settle(held, ZERO)  # (reserve tries at once, before any other task runs)
    reservation = await ledger.reserve(amount, what=what)
    if ctx is not None:
        try:
            ctx.record(EventKind.BUDGET_RESERVED, {
                "id": reservation.id, "model": config.name, "usd": amount.usd,
                "tokens": amount.tokens, "budget": ledger.where})
            await ctx.flush()  # durable before the money is spent: a resume counts it
        except BaseException:
            ledger.settle(reservation, Amount())  # nothing was sent
            raise
    return request, reservation


def _what(config: ModelConfig, ledger: Ledger, ctx: NodeContext | None) -> str:
    """Names the call for messages; raises :class:`UnpricedModel` when a money budget
    applies and the model has no price."""
    where = f"run {ctx.run_id}, node {ctx.node!r}" if ctx is not None else ledger.where
    what = f"{where}: model call to {config.name}"
    if ledger.needs_price and not config.priced:
        raise UnpricedModel(
            f"{what}: the model has no price, so its cost cannot be kept within the money "
            f"budget of {ledger.where}; set price_input and price_output (USD per million "
            f"tokens) for {config.name} in counterpoint.toml"
            f"{f' ({config.source})' if config.source else ''}, or use a token budget")
    return what


def bounded(config: ModelConfig, request: Request) -> Request:
    """``request`` with its answer bounded (``max_tokens`` set), as it is sent under a budget."""
    if request.max_tokens is not None:
        return request
    return request.model_copy(update={
        "max_tokens": config.max_output_tokens or DEFAULT_ANSWER_BOUND})


async def hold(config: ModelConfig, request: Request, count: int, ctx: NodeContext | None
               ) -> list[Reservation] | None:
    """Hold the bound of ``request`` on ``config``'s model up to ``count`` times in the
    budgets that apply: the first waits for room as a single call would (and raises
    :class:`BudgetExceeded` if it can never fit), the others are held only while they fit
    now. ``None`` when no budget applies. Holds are not logged: nothing is sent under
    them; each is exchanged for a logged reservation (:func:`holding`) or given back
    (:func:`release`)."""
    ledger = current_ledger()
    if ledger is None or not ledger.limited:
        return None
    what = _what(config, ledger, ctx)
    held = [await ledger.reserve(bound(config, bounded(config, request)), what=what)]
    while len(held) < count:
        more = hold_more(config, request, ctx)
        if more is None:
            break
        held.append(more)
    return held


def hold_more(config: ModelConfig, request: Request, ctx: NodeContext | None
              ) -> Reservation | None:
    """One more hold of ``request``'s bound if it fits now (never waits); ``None`` if it
    does not, or no budget applies."""
    ledger = current_ledger()
    if ledger is None or not ledger.limited:
        return None
    amount = bound(config, bounded(config, request))
    if not ledger.remaining().covers(amount):
        return None
    try:
        return ledger.try_reserve(amount, what=_what(config, ledger, ctx))
    except BudgetExceeded:  # another thread took the room since
        return None


def release(held: Reservation | None) -> None:
    """Give back a hold that no call used (the sample was answered from the cache, or not
    sent); nothing was spent under it."""
    if held is not None and not held.settled:
        held.ledger.settle(held, ZERO)


@contextmanager
def holding(held: Reservation | None) -> Iterator[None]:
    """Make ``held`` the room the calling task's next reserved call takes (a sample's);
    released on exit if no call took it."""
    token = _HELD.set(held)
    try:
        yield
    finally:
        _HELD.reset(token)
        release(held)


def settle(reservation: Reservation | None, usage: Usage | None) -> dict[str, Any]:
    """Settle ``reservation`` with ``usage`` (``None``: the call failed and was not
    paid for); the fields the call's ``model_call`` event gets."""
    if reservation is None:
        return {}
    actual = Amount() if usage is None else Amount(usage.cost or 0.0, usage.total_tokens)
    reservation.ledger.settle(reservation, actual)
    return {"reservation": reservation.id}


def settle_failed(reservation: Reservation | None, exc: ModelError) -> dict[str, Any]:
    """Settle the reservation of a call that failed: at nothing when the provider
    answered with an HTTP error (it did not serve the call), at its whole bound when no
    answer came (a timeout, a dropped connection: it may have been served and paid for).
    The fields the call's ``model_call`` event gets (``charged``: the bound was kept)."""
    if reservation is None:
        return {}
    if exc.status is not None:
        return settle(reservation, None)
    reservation.ledger.settle(reservation, reservation.amount)
    return {"reservation": reservation.id, "charged": {
        "usd": reservation.amount.usd, "tokens": reservation.amount.tokens}}


def settle_unknown(reservation: Reservation | None) -> None:
    """Settle a call cancelled while it was in flight: it may have been paid for, so it
    keeps its whole reservation as spent."""
    if reservation is not None:
        reservation.ledger.settle(reservation, reservation.amount)


__all__ = ["DEFAULT_ANSWER_BOUND", "bound", "bounded", "hold", "hold_more", "holding",
           "prompt_bound",
           "release", "reserve", "settle", "settle_failed", "settle_unknown"]
