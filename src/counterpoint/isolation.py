"""Steps isolated in a child process, which a cancel or a timeout really stops.

A node with ``isolation="process"`` (``Policy(isolation=...)``, ``g.add(...,
isolation=...)`` or ``@cp.step(isolation=...)``) runs each attempt in a process of its
own, started from a fork server (:mod:`multiprocessing`'s ``forkserver``: no threads of
this process are copied). When the attempt is cancelled or times out, the process is
killed, so nothing of the attempt runs on; that is the guarantee a thread cannot give.

The step and its inputs travel by pickle: the step must be importable (a module-level
function) and its inputs picklable; the output travels back the same way, then is stored
as JSON like any output. A step isolated in a process cannot take a ``NodeContext`` (the
run lives in this process). A process that dies without an answer (killed from outside,
out of memory) is a retryable attempt failure. An output pickle cannot carry back fails
the node with ``OutputNotSerializable``, an exception it cannot carry with ``NodeFailed``,
both naming the run and node and never retried.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import multiprocessing
import pickle
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from .errors import NodeFailed, OutputNotSerializable


@functools.cache
def _context() -> Any:
    """The fork-server context (its server starts at the first isolated step)."""
    return multiprocessing.get_context("forkserver")


def _child(payload: bytes, conn: Connection) -> None:
    """In the child: call the step, send back ``(ok, value)`` pickled."""
    try:
        fn, kwargs = pickle.loads(payload)
        result = fn(**kwargs)
        if inspect.isawaitable(result):
            result = asyncio.run(_awaited(result))
        message: tuple[bool, Any] = (True, result)
    except BaseException as exc:  # the attempt's failure, reported to the parent
        message = (False, exc)
    try:
        data = pickle.dumps(message)
    except Exception as exc:  # an output or exception that pickle cannot carry: described
        ok, value = message
        what = type(value).__name__ if ok else _shown(value)
        data = pickle.dumps((None, (ok, what, f"{type(exc).__name__}: {exc}")))
    conn.send_bytes(data)
    conn.close()


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def _shown(exc: BaseException) -> str:
    try:
        return repr(exc)[:300]
    except Exception:
        return type(exc).__name__


def _unsent(where: str, ok: bool, what: str, why: str) -> Exception:
    """The node's failure when the child could not pickle the step's output (``ok``) or
    exception (``what`` describes it) to send it back: never retried, it would again."""
    if ok:
        return OutputNotSerializable(
            f"{where}: the step's output ({what}) cannot be sent back from its process "
            f"({why}); return JSON-compatible data (a dict, a list, a dataclass or a "
            "pydantic model): a node's output is stored as JSON")
    return NodeFailed(f"{where}: the step raised {what}, which cannot be sent back from its "
                      f"process ({why}); raise an exception whose arguments and attributes "
                      "pickle, or use isolation='thread'", retryable=False)


async def call_in_process(fn: Callable[..., Any], kwargs: dict[str, Any], *,
                          where: str) -> Any:
    """Run ``fn(**kwargs)`` in a child process and return its result, or raise what it
    raised. Cancelling the call kills the process. ``where`` names the node in errors."""
    try:
        payload = pickle.dumps((fn, kwargs))
    except Exception as exc:
        raise NodeFailed(f"{where}: isolation='process' sends the step and its inputs to a "
                         f"child process by pickle, which failed: {exc}; use a module-level "
                         "function and picklable inputs", retryable=False) from exc
    loop = asyncio.get_running_loop()
    receive, send = _context().Pipe(duplex=False)
    process = _context().Process(target=_child, args=(payload, send), daemon=True,
                                 name="counterpoint-isolated-step")
    starting = loop.run_in_executor(None, process.start)  # the fork server may start first
    try:
        await asyncio.shield(starting)
    except asyncio.CancelledError:  # cancelled while it started: it must not run on
        await asyncio.wait([starting])
        if not starting.cancelled() and starting.exception() is None:
            process.kill()
            await loop.run_in_executor(None, process.join)
        send.close()
        receive.close()
        raise
    send.close()  # the child holds the only write end: EOF means it ended
    answered: asyncio.Future[bytes | None] = loop.create_future()

    def readable() -> None:
        loop.remove_reader(receive.fileno())
        if answered.done():
            return
        try:
            answered.set_result(receive.recv_bytes())
        except (EOFError, OSError):
            answered.set_result(None)

    loop.add_reader(receive.fileno(), readable)
    try:
        data = await answered
    except BaseException:  # cancelled or timed out: the attempt ends here, and so does it
        loop.remove_reader(receive.fileno())
        process.kill()
        await loop.run_in_executor(None, process.join)
        receive.close()
        raise
    await loop.run_in_executor(None, process.join)
    receive.close()
    if data is None:
        raise NodeFailed(f"{where}: the step's process ended without an answer (exit code "
                         f"{process.exitcode}); it was killed or crashed", retryable=True)
    ok, value = pickle.loads(data)
    if ok:
        return value
    if ok is None:
        raise _unsent(where, *value)
    raise value
