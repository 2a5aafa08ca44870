"""The exit codes of counterpoint's commands, in one place: the CLI returns them, and the
web view reads them from the ``counterpoint resume`` processes it starts.

A leaf module (it imports nothing of counterpoint), so any layer may name a code.
"""

from __future__ import annotations

import signal

SUCCEEDED = 0
"""The run (or the command) succeeded."""
FAILED = 1
"""The run failed, timed out or was cancelled."""
MISUSE = 2
"""The command was misused: a bad option, a graph that cannot be loaded, an unknown run,
an unusable store."""
WAITING = 3
"""The run's execution ended to wait for people (``run --detach-waiting``): answering an
approval resumes it."""
INTERRUPTED = 128 + signal.SIGINT
"""Ctrl-C stopped the command (130, as a shell reports it)."""
TERMINATED = 128 + signal.SIGTERM
"""SIGTERM stopped the command (143, as a shell reports a process it ended)."""
