"""SIGTERM for the commands that run a graph (``run``, ``resume``): the run stops as it
does on Ctrl-C (its log kept, the run resumable), and the command says so.

``docker stop``, ``systemctl stop`` and ``kill`` send SIGTERM; without a handler the
process ended at once, its last events never shipped to the store's writer and nothing
said. The store's writer process ignores SIGTERM (it ends when its input does), so what
the run recorded is committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal

TERMINATED = 128 + signal.SIGTERM
"""The exit code of a command stopped by SIGTERM (as a shell reports a process it ended)."""


def stop_on_sigterm(stopped: list[int]) -> None:
    """Make SIGTERM cancel the calling task, the command's main coroutine, once (as Ctrl-C
    does), and note it in ``stopped``; a second SIGTERM ends the process at once.
    Called in that task, on the main thread's loop (elsewhere it does nothing)."""
    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    if task is None:
        return

    def on_term() -> None:
        stopped.append(signal.SIGTERM)
        loop.remove_signal_handler(signal.SIGTERM)  # the default again: a second one kills
        task.cancel()

    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        loop.add_signal_handler(signal.SIGTERM, on_term)
