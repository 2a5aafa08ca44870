"""Resolving Python references written in a workflow file.

A reference is ``package.module:name`` (imported by name) or ``path/file.py:name``
(a file, relative to the workflow file's folder; loaded like ``counterpoint run
FILE.py`` loads one, under a stable module name). ``name`` may be dotted
(``module:Class.method``).
"""

from __future__ import annotations

import difflib
import importlib
from pathlib import Path
from types import ModuleType
from typing import Any

from ..errors import SourceError
from ..loader import load_file
from ..loader_messages import syntax_error_text


class ImportProblem(Exception):
    """A reference cannot be resolved; ``hint`` says what to check, ``where`` (when not
    empty) the ``file:line`` of the Python file at fault (a syntax error in it)."""

    def __init__(self, message: str, hint: str = "", *, where: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.where = where


def is_file_ref(module: str) -> bool:
    """Whether the module part of a reference names a file rather than a module."""
    return module.endswith(".py") or "/" in module or "\\" in module


def resolve(ref: str, base: Path) -> Any:
    """The object ``ref`` names; files are relative to ``base`` (a folder)."""
    module_part, sep, attr = ref.partition(":")
    if not sep or not module_part or not attr:
        raise ImportProblem(f"{ref!r} is not a Python reference",
                            "write package.module:function or file.py:function")
    module = _module(module_part, base)
    target: Any = module
    walked: list[str] = []
    for part in attr.split("."):
        if not hasattr(target, part):
            names = [n for n in dir(target) if not n.startswith("_")]
            close = difflib.get_close_matches(part, names, n=1)
            owner = module_part + (":" + ".".join(walked) if walked else "")
            raise ImportProblem(f"{ref!r}: {owner} has no attribute {part!r}",
                                f"did you mean {close[0]!r}?" if close
                                else "check the name after the colon")
        target = getattr(target, part)
        walked.append(part)
    return target


def _module(name: str, base: Path) -> ModuleType:
    if is_file_ref(name):
        file = Path(name)
        file = file if file.is_absolute() else base / file
        if not file.is_file():
            raise ImportProblem(f"no such file {name!r} (looked for {file})",
                                "file paths are relative to the workflow file's folder")
        try:
            return load_file(file)
        except SourceError as exc:
            if isinstance(exc.__cause__, SyntaxError):
                raise _syntax_problem(exc.__cause__, file) from None
            raise ImportProblem(f"cannot load {name!r}: {exc}",
                                "fix the error in that file") from None
    try:
        return importlib.import_module(name)
    except SyntaxError as exc:
        raise _syntax_problem(exc, Path(name)) from None
    except ModuleNotFoundError as exc:
        raise ImportProblem(f"no module named {exc.name or name!r}",
                            "install it, or check the module path (a file needs .py)") \
            from None
    except Exception as exc:
        raise ImportProblem(f"importing module {name!r} raised {type(exc).__name__}: {exc}",
                            "fix the error in that module") from None


def _syntax_problem(exc: SyntaxError, file: Path) -> ImportProblem:
    """``exc`` as ``FILE:LINE: SyntaxError: what: `the line``` (the loader's words for
    ``counterpoint run FILE.py``, :func:`counterpoint.loader.syntax_error_text`)."""
    where, what = syntax_error_text(exc, file)
    return ImportProblem(what, "fix that line", where=where)
