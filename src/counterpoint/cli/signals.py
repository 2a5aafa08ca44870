"""Ctrl-C and SIGTERM in the commands that run a graph (``run``, ``resume``, ``fork``,
``approve``/``reject`` resuming a run): the run stops (its log kept, the run
resumable), and the command says so and how to go on.

``docker stop``, ``systemctl stop`` and ``kill`` send SIGTERM; without a handler the
process ended at once, its last events never shipped to the store's writer and nothing
said. The store's writer process ignores SIGTERM (it ends when its input does), so what
the run recorded is committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable

from ..exits import INTERRUPTED, TERMINATED


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


def interrupted(run_id: str | None, db: str | None, *, terminated: bool = False) -> int:
    """Ctrl-C (exit code 130) or SIGTERM (143) stopped the run ``run_id`` (``None``: before
    it began): say so on stderr, and how to go on; the exit code."""
    from rich.text import Text

    from .console import make_console
    from .stores import db_flag
    message = "terminated (SIGTERM)" if terminated else "interrupted"
    if run_id is not None:
        message += (f": run {run_id} stopped; continue it with `counterpoint resume "
                    f"{run_id}{db_flag(db)}`")
    make_console(stderr=True).print(Text(message, style="yellow"), soft_wrap=True)
    return TERMINATED if terminated else INTERRUPTED


STEP_THREADS = "counterpoint-step"
"""How the in-process backend names the threads of sync steps (counterpoint.backend)."""


CLOSE_SECONDS = 2.0
"""How long a second Ctrl-C waits for idle stores to close before the process ends."""


def _quietly(close: Callable[[], None]) -> None:
    with contextlib.suppress(Exception):
        close()


def quit_without_waiting(code: int) -> None:
    """After a run was stopped (exit ``code``, 130 or 143), when threads still run (a sync
    step cannot be stopped, and Python waits for its thread before the process ends, as
    long as the step takes): say so, and make a second Ctrl-C or SIGTERM end the process
    at once, with no traceback. The run's log is closed by then, so it resumes either
    way; a store nobody uses any more is closed first (what it was given is committed)."""
    busy = [t for t in threading.enumerate()
            if t is not threading.main_thread() and t.is_alive() and not t.daemon]
    if not busy:
        return
    steps = sum(1 for t in busy if t.name.startswith(STEP_THREADS))
    what = f"{steps} step(s) in threads" if steps == len(busy) else f"{len(busy)} thread(s)"

    def now(_signum: int, _frame: object) -> None:
        from ..store.shared import close_idle_stores
        # in a thread, for a bounded time: this handler runs wherever the main thread was
        # interrupted, maybe holding a lock the close needs; what the run recorded is
        # committed either way (each handle flushed as it closed, and a writer whose
        # input ends commits and exits)
        closing = threading.Thread(target=_quietly, args=(close_idle_stores,),
                                   name="counterpoint-quit", daemon=True)
        closing.start()
        closing.join(CLOSE_SECONDS)
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)

    for number in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(ValueError, OSError):  # not the main thread
            signal.signal(number, now)
    # said only once a second Ctrl-C is handled: one sent on reading it must find ``now``
    print(f"waiting for {what} to return (a sync step cannot be stopped); Ctrl-C again "
          "quits at once, and the run resumes from its log either way",
          file=sys.stderr, flush=True)
