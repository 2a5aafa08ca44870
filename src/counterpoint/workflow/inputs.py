"""Binding values to a workflow's declared inputs: defaults, conversions, clear errors.

Values come from Python (already typed) or from the command line (``--input
key=value``, text, or whatever JSON it parsed as). Each is converted to its
declared type: ``string``, ``integer``, ``number``, ``boolean``, ``list``,
``object``; text is parsed (``"3"`` -> 3, ``"yes"`` -> True, JSON for lists and
objects).
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .errors import Problem, WorkflowError

if TYPE_CHECKING:
    from .spec import InputSpec

_TRUE = frozenset({"true", "yes", "on", "1", "y"})
_FALSE = frozenset({"false", "no", "off", "0", "n"})
PYTHON_TYPES: dict[str, type] = {"string": str, "integer": int, "number": float,
                                 "boolean": bool, "list": list, "object": dict}
"""Declared input type -> the Python type of its bound values."""


class InputProblem(ValueError):
    """A value does not fit its declared type; the message says what was expected."""


def convert(kind: str, value: Any) -> Any:
    """``value`` as the declared type ``kind``; raises :class:`InputProblem`."""
    if kind == "string":
        if isinstance(value, str):
            return value
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int | float):
            return str(value)
        raise InputProblem(f"expects text, got {_shown(value)}")
    if kind == "integer":
        if isinstance(value, bool):
            raise InputProblem(f"expects a whole number, got {_shown(value)}")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                pass
        raise InputProblem(f"expects a whole number, got {_shown(value)}")
    if kind == "number":
        if isinstance(value, int | float) and not isinstance(value, bool):
            return value
        if isinstance(value, str):
            try:
                number = float(value.strip())
            except ValueError:
                number = math.nan
            if math.isfinite(number):
                return number
        raise InputProblem(f"expects a number, got {_shown(value)}")
    if kind == "boolean":
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower() if isinstance(value, str | int) else None
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise InputProblem(f"expects true or false, got {_shown(value)}")
    if kind == "list":
        parsed = _json(value) if isinstance(value, str) else value
        if isinstance(parsed, list | tuple):
            return list(parsed)
        raise InputProblem(f"expects a list, got {_shown(value)} (pass JSON: "
                           "'[\"a\", \"b\"]')")
    parsed = _json(value) if isinstance(value, str) else value
    if isinstance(parsed, Mapping):
        return dict(parsed)
    raise InputProblem(f"expects an object, got {_shown(value)} (pass JSON: '{{\"key\": 1}}')")


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def bind(workflow: str, specs: Mapping[str, InputSpec], declared_at: Mapping[str, str],
         file: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """Every declared input's value: given (converted) or default. Raises
    :class:`WorkflowError` listing every missing, unknown or ill-typed input."""
    problems: list[Problem] = []
    bound: dict[str, Any] = {}
    for name in values:
        if name not in specs:
            close = difflib.get_close_matches(name, list(specs), n=1)
            declared = ", ".join(specs) or "none"
            problems.append(Problem(
                where=file, message=f"workflow {workflow!r} has no input {name!r}",
                hint=(f"did you mean {close[0]!r}? " if close else "")
                + f"(declared inputs: {declared})"))
    for name, spec in specs.items():
        where = declared_at.get(name, file)
        about = f"{spec.type}" + (f": {spec.description}" if spec.description else "")
        if name not in values:
            if spec.required:
                problems.append(Problem(
                    where=where, message=f"workflow {workflow!r} needs input {name!r} "
                                         f"({about})",
                    hint=f"pass it with --input {name}=VALUE (from Python: "
                         f"inputs={{{name!r}: ...}})"))
            else:  # checked when the file was loaded; null means "no value"
                bound[name] = None if spec.default is None else convert(spec.type,
                                                                        spec.default)
            continue
        try:
            bound[name] = convert(spec.type, values[name])
        except InputProblem as exc:
            problems.append(Problem(where=where, message=f"input {name!r} {exc}",
                                    hint=f"pass {_article(spec.type)} {spec.type} value: "
                                         f"--input {name}=VALUE"))
    if problems:
        raise WorkflowError(problems, file=file)
    return bound


def _article(word: str) -> str:
    """``a`` or ``an`` before ``word`` (the input types: string, integer, number...)."""
    return "an" if word[:1].lower() in "aeiou" else "a"
