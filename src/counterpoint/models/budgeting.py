"""A model call's reservation in the budgets that apply, and its settlement.

Before an attempt is sent, :func:`reserve` bounds its cost: the prompt's tokens (at
most one per byte of the request as JSON, a bound for byte-level tokenizers) plus the
answer's ``max_tokens`` (the request's, else the model's ``max_output_tokens``, else
:data:`DEFAULT_ANSWER_BOUND`, which is then sent as the request's ``max_tokens`` so that
the provider enforces it), priced at the model's prices. The reservation is recorded
(``budget_reserved``) and made durable before the call is sent; :func:`settle` replaces
it by the real usage, and the ``model_call`` event names it. See :mod:`counterpoint.budget`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..budget import Amount, Reservation, current_ledger
from ..errors import ModelError, UnpricedModel
from ..events import EventKind
from .config import ModelConfig
from .types import Request, Usage

if TYPE_CHECKING:
    from ..context import NodeContext

DEFAULT_ANSWER_BOUND = 4096
"""Answer tokens reserved (and asked for) when neither the call nor the model sets any."""


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
    where = f"run {ctx.run_id}, node {ctx.node!r}" if ctx is not None else ledger.where
    what = f"{where}: model call to {config.name}"
    if ledger.needs_price and not config.priced:
        raise UnpricedModel(
            f"{what}: the model has no price, so its cost cannot be kept within the money "
            f"budget of {ledger.where}; set price_input and price_output (USD per million "
            f"tokens) for {config.name} in counterpoint.toml"
            f"{f' ({config.source})' if config.source else ''}, or use a token budget")
    if request.max_tokens is None:
        request = request.model_copy(update={
            "max_tokens": config.max_output_tokens or DEFAULT_ANSWER_BOUND})
    amount = bound(config, request)
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


__all__ = ["DEFAULT_ANSWER_BOUND", "bound", "prompt_bound", "reserve", "settle",
           "settle_failed", "settle_unknown"]
