"""Where the commands print: consoles, and the one-line errors that exit with code 2.

The commands of every CLI module share these; they import nothing of the library.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, NoReturn

import typer

from ..errors import UserError
from ..exits import MISUSE

if TYPE_CHECKING:
    from rich.console import Console

PIPE_WIDTH = 120
"""Console width when the output is not a terminal (and ``COLUMNS`` is not set)."""


def make_console(*, stderr: bool = False) -> Console:
    from rich.console import Console
    console = Console(stderr=stderr, highlight=False, markup=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = PIPE_WIDTH
    return console


def fail(message: str) -> NoReturn:
    """Print ``error: message`` on stderr and exit with code 2."""
    from rich.text import Text
    make_console(stderr=True).print(Text(f"error: {message}", style="red"), soft_wrap=True)
    raise typer.Exit(MISUSE)


@contextlib.contextmanager
def reported() -> Iterator[None]:
    """Turn a :class:`UserError` into one ``error:`` line and exit code 2."""
    try:
        yield
    except UserError as exc:
        from ..secrets import redact

        fail(redact(str(exc)))
