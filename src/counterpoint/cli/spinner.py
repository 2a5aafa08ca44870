"""A spinner on stderr while a command waits for a model: elapsed time and tokens so far.

Shown only when stderr is a terminal (a pipe or a log file gets nothing), so the
commands' output stays the same when scripted. Tokens are counted from the streamed
text pieces (one piece is about one token), so :attr:`Working.stream` is handed to
the model call as its ``stream=`` sink when :attr:`Working.shown`.
"""

from __future__ import annotations

import time
from types import TracebackType
from typing import TYPE_CHECKING

from .console import make_console

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult
    from rich.status import Status


class Working:
    """``with Working("planning"):`` shows ``⠋ planning 3.2s, 41 tokens`` until the end."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.tokens = 0
        self._started = time.monotonic()
        self._console = make_console(stderr=True)
        self._status: Status | None = None

    @property
    def shown(self) -> bool:
        """Whether the spinner is drawn (stderr is a terminal)."""
        return self._console.is_terminal

    def stream(self, piece: str) -> None:
        """A model's ``stream=`` sink: counts the pieces as they arrive."""
        self.tokens += 1

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from rich.text import Text
        elapsed = time.monotonic() - self._started
        tokens = f", {self.tokens:,} token{'s' if self.tokens != 1 else ''}" \
            if self.tokens else ""
        yield Text(f"{self.label} {elapsed:.1f}s{tokens}", style="dim")

    def __enter__(self) -> Working:
        self._started = time.monotonic()
        if self.shown:
            self._status = self._console.status(self, spinner="dots")
            self._status.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None
