"""The ``counterpoint`` command line: run, resume, show, list and cancel runs.

It sits on top of the library (the core never imports it): ``app`` wires the
commands, ``live`` follows a run as it executes, ``render`` prints summaries,
``projection`` and ``recorded`` rebuild a run from its log without its code.
"""

from __future__ import annotations

from .app import app, main

__all__ = ["app", "main"]
