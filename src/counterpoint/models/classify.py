"""Turning a provider's failure into the right :class:`~counterpoint.errors.ModelError`.

Retryable: 408, 409, 429, 5xx (and Anthropic's 529 "overloaded"), timeouts,
connection errors, a stream cut off before its end, an answer that does not
parse. Not retryable: other 4xx (bad request, credentials, permissions, unknown
model), a prompt too long for the context window, a refusal. Messages built here
never carry a registered secret (see ``counterpoint.secrets``): a provider that
echoes the API key in its error body is redacted.
"""

from __future__ import annotations

import datetime
import email.utils
import time
import urllib.parse
from collections.abc import Callable, Mapping

from ..errors import (
    ContextTooLong,
    ModelError,
    ModelRejected,
    ModelUnavailable,
    RateLimited,
)
from ..secrets import redact

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


MAX_RETRY_AFTER = 300.0
"""Longest wait taken from a provider's ``Retry-After`` (a day-long quota reset is
better reported than slept through)."""


def retry_after(headers: Mapping[str, str] | None, *,
                now: Callable[[], float] = time.time) -> float | None:
    """Seconds to wait from ``retry-after-ms`` / ``Retry-After`` (seconds or HTTP date).

    A value that is neither (``soon``), negative or not a number is ignored
    (``None``); a date in the past is 0; anything longer than ``MAX_RETRY_AFTER`` is
    capped. ``now`` gives the current Unix time, for HTTP dates. Never raises.
    """
    if not headers:
        return None
    lower = {k.lower(): v for k, v in headers.items()}
    ms = _seconds(lower.get("retry-after-ms"))
    if ms is not None:
        return min(ms / 1000, MAX_RETRY_AFTER)
    value = lower.get("retry-after")
    if value is None:
        return None
    seconds = _seconds(value)
    if seconds is None:
        seconds = _until(value, now)
    return None if seconds is None else min(seconds, MAX_RETRY_AFTER)


def _seconds(value: str | None) -> float | None:
    """A non-negative number of seconds, or ``None``."""
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if seconds >= 0 else None  # also rejects NaN


def _until(value: str, now: Callable[[], float]) -> float | None:
    """Seconds from now until an HTTP date (RFC 9110 IMF-fixdate or an obsolete form)."""
    try:
        when = email.utils.parsedate_to_datetime(value.strip())
    except (ValueError, TypeError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # "-0000" or no zone: HTTP dates are always GMT
        when = when.replace(tzinfo=datetime.UTC)
    return max(0.0, when.timestamp() - now())


def from_status(model: str, status: int, message: str,
                headers: Mapping[str, str] | None = None) -> ModelError:
    """The error for an HTTP error answer."""
    wait = retry_after(headers)
    detail = redact(" ".join(message.split()))[:500]
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


def timed_out(model: str, timeout: float | None, url: str | None = None, *,
              received: int = 0) -> ModelUnavailable:
    """The error for an attempt that ran out of time: names the server (``url``, without
    any password in it), the time limit, how much of a streamed answer had come
    (``received`` characters: it stalled, rather than never answered) and what to set."""
    at = "" if url is None else f" from {shown_url(url)}"
    within = "" if timeout is None else f" within {timeout:g}s"
    what = (f"the answer{at} stalled after {received} characters: it was not complete"
            if received else f"no answer{at}")
    return ModelUnavailable(
        f"model {model}: {what}{within} (the timeout of one attempt); if the server is "
        "only slow, raise the model's timeout (Model(timeout=...), or timeout = ... in its "
        "counterpoint.toml entry)", model=model)


def unreachable(model: str, cause: BaseException | str,
                url: str | None = None) -> ModelUnavailable:
    """The error for a server that could not be reached; names ``url`` (without any
    user or password in it) and what to do."""
    if url is None:
        return ModelUnavailable(f"model {model}: cannot connect: {redact(str(cause))}",
                                model=model)
    if type(cause).__name__ == "RemoteProtocolError":  # httpx's (either SDK's copy of it)
        return ModelUnavailable(
            f"model {model}: the server at {shown_url(url)} closed the connection before "
            f"its answer was complete: {redact(str(cause))}; its own log says why",
            model=model)
    return ModelUnavailable(
        f"model {model}: cannot connect to {shown_url(url)}: {redact(str(cause))}; start "
        "the server, or fix the model's base_url (counterpoint models checks every "
        "configured model)", model=model)


def shown_url(url: str) -> str:
    """``url`` without the ``user:password@`` part a base_url may carry."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urllib.parse.urlunsplit(parts._replace(
        netloc="***@" + parts.netloc.rpartition("@")[2]))
