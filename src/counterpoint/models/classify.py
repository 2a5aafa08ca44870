"""Turning a provider's failure into the right :class:`~counterpoint.errors.ModelError`.

Retryable: 408, 409, 429, 5xx (and Anthropic's 529 "overloaded"), timeouts,
connection errors, a stream cut off before its end, an answer that does not
parse. Not retryable: other 4xx (bad request, credentials, permissions, unknown
model), a prompt too long for the context window, a refusal.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping

from ..errors import (
    ContextTooLong,
    ModelError,
    ModelRejected,
    ModelUnavailable,
    RateLimited,
)

_CONTEXT_HINTS = ("context length", "context_length", "maximum context", "too many tokens",
                  "prompt is too long", "context window", "exceeds the context")
_WHAT_TO_DO = {
    400: "the request was rejected as invalid",
    401: "check the API key variable configured for this model",
    403: "the key is not allowed to use this model",
    404: "check the model id and base URL",
    413: "the request is too large",
    422: "the request was rejected as invalid",
}


def retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` / ``Retry-After`` (seconds or HTTP date)."""
    if not headers:
        return None
    lower = {k.lower(): v for k, v in headers.items()}
    if (ms := lower.get("retry-after-ms")) is not None:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = lower.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        return None if parsed is None else max(0.0, parsed.timestamp() - time.time())


def from_status(model: str, status: int, message: str,
                headers: Mapping[str, str] | None = None) -> ModelError:
    """The error for an HTTP error answer."""
    wait = retry_after(headers)
    detail = " ".join(message.split())[:500]
    if status == 429 or status == 529:
        return RateLimited(f"model {model}: rate limited (HTTP {status}): {detail}",
                           model=model, status=status, retry_after=wait)
    if status in (408, 409) or status >= 500:
        return ModelUnavailable(f"model {model}: provider error (HTTP {status}): {detail}",
                                model=model, status=status, retry_after=wait)
    if any(hint in message.lower() for hint in _CONTEXT_HINTS):
        return ContextTooLong(f"model {model}: the prompt does not fit the context window "
                              f"(HTTP {status}): {detail}; shorten the input or use a model "
                              "with a larger window", model=model, status=status)
    advice = _WHAT_TO_DO.get(status, "the provider rejected the request")
    return ModelRejected(f"model {model}: HTTP {status}: {detail} ({advice})",
                         model=model, status=status)


def timed_out(model: str, timeout: float | None) -> ModelUnavailable:
    after = "" if timeout is None else f" after {timeout:g}s"
    return ModelUnavailable(f"model {model}: no answer{after} (timeout)", model=model)


def unreachable(model: str, cause: BaseException | str) -> ModelUnavailable:
    return ModelUnavailable(f"model {model}: cannot connect: {cause}", model=model)
