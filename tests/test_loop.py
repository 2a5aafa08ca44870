"""The event loop counterpoint runs on where it owns the process (counterpoint.loop)."""

from __future__ import annotations

import asyncio
import selectors
import socket
import sys

import pytest

import counterpoint as cp
from counterpoint import loop as cploop

linux_only = pytest.mark.skipif(not hasattr(selectors, "EpollSelector"),
                                reason="the precise selector replaces epoll (Linux)")


def _selector_of(loop: asyncio.AbstractEventLoop) -> object:
    return getattr(loop, "_selector", None)


@linux_only
def test_new_event_loop_waits_with_the_precise_selector() -> None:
    loop = cp.new_event_loop()
    try:
        assert isinstance(loop, asyncio.SelectorEventLoop)
        assert type(_selector_of(loop)) is cploop.PreciseSelector
    finally:
        loop.close()


def test_counterpoint_loop_default_keeps_asyncios_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COUNTERPOINT_LOOP", "default")
    loop = cp.new_event_loop()
    try:
        assert cploop.PreciseSelector is None or \
            type(_selector_of(loop)) is not cploop.PreciseSelector
    finally:
        loop.close()


async def _timers_sockets_and_a_subprocess() -> tuple[list[str], bytes, bytes]:
    loop = asyncio.get_running_loop()
    fired: list[str] = []
    start = loop.time()
    loop.call_later(0.003, fired.append, "3ms")
    loop.call_later(0.001, fired.append, "1ms")
    await asyncio.sleep(0.0023)
    slept = loop.time() - start
    assert slept >= 0.0023 - 1e-6, f"woke {0.0023 - slept:.6f}s early"  # never early
    await asyncio.sleep(0.002)
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    with a, b:
        reader = asyncio.ensure_future(loop.sock_recv(b, 16))
        await asyncio.sleep(0.001)  # the reader waits on the selector, with a timer pending
        await loop.sock_sendall(a, b"ping")
        got = await asyncio.wait_for(reader, 5)
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "print('child')",
                                                stdout=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()
    return fired, got, out


def test_the_loop_fires_timers_in_order_and_serves_sockets_and_subprocesses() -> None:
    fired, got, out = cploop.run(_timers_sockets_and_a_subprocess())
    assert fired == ["1ms", "3ms"]
    assert got == b"ping"
    assert out.strip() == b"child"


@linux_only
def test_an_epoll_descriptor_select_cannot_take_falls_back_to_epoll_wait(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cploop, "_SELECT_LIMIT", 0)  # as if the epoll fd were >= 1024
    fired, got, out = cploop.run(_timers_sockets_and_a_subprocess())
    assert fired == ["1ms", "3ms"] and got == b"ping" and out.strip() == b"child"


@linux_only
def test_run_sync_and_the_policy_use_the_precise_loop() -> None:
    async def selector_name() -> str:
        return type(_selector_of(asyncio.get_running_loop())).__name__

    g = cp.Graph("which-loop")
    g.add("loop", selector_name)
    assert cp.run_sync(g, store="memory")["loop"] == "PreciseSelector"

    previous = asyncio.get_event_loop_policy()
    asyncio.set_event_loop_policy(cp.EventLoopPolicy())
    try:
        assert asyncio.run(selector_name()) == "PreciseSelector"
    finally:
        asyncio.set_event_loop_policy(previous)
