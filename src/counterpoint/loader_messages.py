"""What went wrong while a user's graph file or module was imported, said where an editor
finds it: ``FILE:LINE: ...`` at the line of the user's file that was running, and for a
syntax error the faulty line itself. :mod:`counterpoint.loader` (``counterpoint run
FILE.py``, ``package.module``) and the workflow layer's ``python:`` references share it."""

from __future__ import annotations

import os
import traceback
from pathlib import Path

from .errors import CounterpointError, SourceError
from .failures import exception_text

_PACKAGE = str(Path(__file__).resolve().parent)
"""Where counterpoint's own modules are: a frame there is not where a user's mistake is."""


def import_failed(exc: Exception, file: Path | None, path: str) -> SourceError:
    """The error for importing the user's ``file`` (named ``path`` to the user) that raised
    ``exc``: ``path:LINE: importing it raised ...`` at the line of ``file`` that was
    running, or, for a syntax error, the file and line at fault with that line
    (:func:`syntax_error_text`)."""
    if isinstance(exc, SyntaxError):
        where, what = syntax_error_text(exc, file, path)
        via = _raised_at(exc, file, path) if file is not None else path
        imported = f" (imported from {via})" if where.partition(":")[0] != path and \
            via != path else ""
        return SourceError(f"{where}: {what}; fix that line{imported}")
    located = _located_in(exc, file, path) if file is not None else None
    if located is not None:  # a GraphError of a g.add in the file: it says where already
        return SourceError(located)
    where = _raised_at(exc, file, path) if file is not None else path
    return SourceError(f"{where}: importing it raised {type(exc).__name__}: "
                       f"{exception_text(exc)}")


def _located_in(exc: Exception, file: Path, path: str) -> str | None:
    """The message of a counterpoint error that begins with a line of ``file`` (a
    :class:`~counterpoint.errors.GraphError` names its ``g.add`` call), with the file as
    the user named it; ``None`` for any other error, which gets the line it raised at."""
    if not isinstance(exc, CounterpointError):
        return None
    text = str(exc)
    for spelled in {str(file.resolve()), str(file)}:
        if text.startswith(f"{spelled}:"):
            return path + text[len(spelled):]
    return None


def syntax_error_text(exc: SyntaxError, file: Path | None = None,
                      path: str | None = None) -> tuple[str, str]:
    """``(FILE:LINE, "SyntaxError: what: `the line`")`` for ``exc``, where Python's own
    text puts ``(file.py, line 2)`` inside the message and shows the line not at all.
    FILE is ``path`` when the error is in ``file`` (the file the user named, as they
    named it), else the faulty file relative to the working directory when inside it."""
    fault = exc.filename or (str(file) if file is not None else path or "?")
    shown = path if path is not None and file is not None and _same_file(fault, file) \
        else shown_path(fault)
    line = (exc.text or "").strip()
    what = f"{type(exc).__name__}: {exc.msg}" + (f": `{line}`" if line else "")
    return (f"{shown}:{exc.lineno}" if exc.lineno else shown), what


def shown_path(path: str) -> str:
    """``path`` relative to the working directory when it is inside it, else as given."""
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive
        return path
    return relative if not relative.startswith("..") and os.getcwd() != os.sep else path


def _same_file(name: str, file: Path) -> bool:
    try:
        return Path(name).resolve() == file.resolve()
    except OSError:
        return False


def _raised_at(exc: BaseException, file: Path, path: str) -> str:
    """``path:LINE``, the line of ``file`` that was running when importing it raised
    ``exc`` (the last such frame), with where it was raised if that is another file's
    (outside counterpoint); ``path`` alone if no frame of ``file`` is on the traceback."""
    frames = traceback.extract_tb(exc.__traceback__)
    mine = str(file.resolve())
    own = [f for f in frames if f.filename == mine]
    if not own:
        return path
    where = f"{path}:{own[-1].lineno}"
    deepest = frames[-1]
    if deepest.filename != mine and not deepest.filename.startswith(_PACKAGE):
        where += f" (raised at {shown_path(deepest.filename)}:{deepest.lineno})"
    return where
