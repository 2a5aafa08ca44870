"""Where in the user's code a step failed: the innermost frame of the traceback that is
neither counterpoint's, nor the standard library's (asyncio, threading, ...), nor an
installed library's.

Computed only when an attempt fails (it walks the traceback's frames, reading no source
file), and recorded in the ``node_failed`` event, so ``counterpoint show`` can say
``failed at steps.py:42 in fetch`` long after the process is gone.
"""

from __future__ import annotations

import os
import sysconfig
import traceback
from pathlib import Path
from types import TracebackType
from typing import Any

_OWN = str(Path(__file__).resolve().parent) + os.sep
_STDLIB = tuple({str(Path(sysconfig.get_paths()[key]).resolve()) + os.sep
                 for key in ("stdlib", "platstdlib")})
_LIBRARIES = (f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}")

USER, LIBRARY, OTHER = 2, 1, 0
"""How much a frame looks like the user's own code (higher is more)."""


def _rank(filename: str) -> int:
    if filename.startswith("<"):  # <frozen ...>, <string>
        return OTHER
    path = os.path.realpath(filename) if not filename.startswith(_OWN) else filename
    if path.startswith(_OWN) or path.startswith(_STDLIB):
        return OTHER
    if any(part in path for part in _LIBRARIES):
        return LIBRARY
    return USER


def _innermost(tb: TracebackType | None) -> tuple[int, dict[str, Any]] | None:
    best: tuple[int, dict[str, Any]] | None = None
    for frame, line in traceback.walk_tb(tb):
        code = frame.f_code
        rank = _rank(code.co_filename)
        if rank > OTHER and (best is None or rank >= best[0]):
            best = (rank, {"file": code.co_filename, "line": line,
                           "function": code.co_qualname})
    return best


def failure_location(exc: BaseException) -> dict[str, Any] | None:
    """``{"file", "line", "function"}`` of the innermost frame of the user's code in
    ``exc``'s traceback (or in its cause's, for an error counterpoint raised from one);
    an installed library's frame when no frame is the user's; ``None`` when neither."""
    best: tuple[int, dict[str, Any]] | None = None
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < 8:
        seen.add(id(current))
        found = _innermost(current.__traceback__)
        if found is not None and (best is None or found[0] > best[0]):
            best = found
        if best is not None and best[0] == USER:
            break
        current = current.__cause__ or current.__context__
    return best[1] if best is not None else None


def exception_text(exc: BaseException) -> str:
    """``str(exc)``, or its type's name when that is empty; an exception whose ``__str__``
    itself raises is described, not allowed to break the recording of the failure."""
    try:
        text = str(exc)
    except Exception as broken:  # a user's exception class with a broken __str__
        return (f"<{type(exc).__name__}: its __str__ raised {type(broken).__name__}: "
                f"{_plain(broken)}>")
    return text or type(exc).__name__


def _plain(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:
        return "?"
