"""``${...}`` templates: parsing them, and rendering them from resolved values.

A reference names a value: ``${inputs.NAME}``, ``${steps.ID.output}`` (with an
optional dotted path into a JSON output: ``${steps.ID.output.title}``,
``${steps.ID.output.points.0}``), ``${steps.ID.iterations}`` (a loop step's
outputs, one per iteration), ``${item}`` (the item of a map step),
``${loop.index}`` / ``${loop.previous}`` (in a loop step), ``${output}`` (the
current iteration's output, in ``loop.until``) and ``${workflow.dir}`` /
``${workflow.name}``. ``$${`` writes a literal ``${``.

A template that is exactly one reference renders to the value itself, keeping
its type (a list stays a list); in a longer string each value is rendered as
text (JSON for lists and objects, ``true``/``false``, empty for null).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pydantic

ROOTS = ("inputs", "steps", "item", "loop", "output", "workflow")
STEP_FIELDS = ("output", "iterations")
LOOP_FIELDS = ("index", "previous")
WORKFLOW_FIELDS = ("dir", "name")
_SEGMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*|\d+")
_OPEN = re.compile(r"\$\$\{|\$\{")

Resolver = Callable[["Ref"], Any]
"""Gives the value a reference names (path applied), or raises :class:`TemplateError`."""


class TemplateSyntaxError(ValueError):
    """A template or reference is malformed. ``hint`` says how to write it."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class TemplateError(LookupError):
    """A reference could not be resolved at run time (a key missing from an output)."""


@dataclass(frozen=True, slots=True)
class Ref:
    """One parsed reference. ``text`` is what was written between ``${`` and ``}``."""

    root: str
    """``inputs``, ``steps``, ``item``, ``loop``, ``output`` or ``workflow``."""
    name: str = ""
    """The input name, step id, or the field of ``loop``/``workflow``."""
    field: str = ""
    """For ``steps``: ``output`` or ``iterations``."""
    path: tuple[str | int, ...] = ()
    """Keys and indexes into the value."""
    text: str = ""


@dataclass(frozen=True, slots=True)
class Template:
    """A string with ``${...}`` references: literal text and :class:`Ref` parts."""

    parts: tuple[str | Ref, ...]
    source: str

    @property
    def refs(self) -> tuple[Ref, ...]:
        return tuple(p for p in self.parts if isinstance(p, Ref))

    @property
    def single(self) -> Ref | None:
        """The reference if the template is exactly one reference (its type is kept)."""
        if len(self.parts) == 1 and isinstance(self.parts[0], Ref):
            return self.parts[0]
        return None

    def render(self, resolve: Resolver) -> Any:
        """The value (a single reference) or the text with every reference rendered."""
        single = self.single
        if single is not None:
            return resolve(single)
        return "".join(p if isinstance(p, str) else to_text(resolve(p)) for p in self.parts)


def parse_template(text: str) -> Template:
    """Parse ``text``; raises :class:`TemplateSyntaxError`."""
    parts: list[str | Ref] = []
    literal: list[str] = []
    pos = 0
    for match in _OPEN.finditer(text):
        if match.start() < pos:
            continue  # inside a reference already consumed
        literal.append(text[pos:match.start()])
        if match.group() == "$${":
            literal.append("${")
            pos = match.end()
            continue
        close = text.find("}", match.end())
        if close < 0:
            raise TemplateSyntaxError(f"unclosed ${{ in {text!r}",
                                      "close the reference with }, or write $${ for a "
                                      "literal ${")
        if "".join(literal):
            parts.append("".join(literal))
        literal = []
        parts.append(parse_ref(text[match.end():close]))
        pos = close + 1
    literal.append(text[pos:])
    tail = "".join(literal)
    if tail:
        parts.append(tail)
    return Template(parts=tuple(parts), source=text)


def parse_ref(inner: str) -> Ref:
    """Parse what is written between ``${`` and ``}``; raises :class:`TemplateSyntaxError`."""
    text = inner.strip()
    if not text:
        raise TemplateSyntaxError("empty reference ${}", "write e.g. ${inputs.topic} or "
                                  "${steps.ID.output}")
    raw = text.split(".")
    for segment in raw:
        if not _SEGMENT.fullmatch(segment):
            raise TemplateSyntaxError(
                f"${{{text}}}: {segment!r} is not a valid path segment" if segment
                else f"${{{text}}}: empty path segment",
                "segments are names (letters, digits, _ and -) or list indexes, "
                "joined by dots: ${steps.ID.output.points.0}")
    segments: list[str | int] = [int(s) if s.isdigit() else s for s in raw]
    root = raw[0]
    rest = segments[1:]
    if root == "inputs":
        if not rest or not isinstance(rest[0], str):
            raise TemplateSyntaxError(f"${{{text}}} names no input", "write ${inputs.NAME}")
        return Ref("inputs", rest[0], "", tuple(rest[1:]), text)
    if root == "steps":
        if not rest or not isinstance(rest[0], str):
            raise TemplateSyntaxError(f"${{{text}}} names no step", "write ${steps.ID.output}")
        if len(rest) < 2 or rest[1] not in STEP_FIELDS:
            got = f"{rest[1]!r}" if len(rest) > 1 else "nothing"
            raise TemplateSyntaxError(
                f"${{{text}}}: expected 'output' or 'iterations' after the step id, got {got}",
                f"write ${{steps.{rest[0]}.output}}" + _suggest(rest[1:2], STEP_FIELDS))
        return Ref("steps", rest[0], str(rest[1]), tuple(rest[2:]), text)
    if root in ("item", "output"):
        return Ref(root, "", "", tuple(rest), text)
    if root == "loop":
        if not rest or rest[0] not in LOOP_FIELDS or (rest[0] == "index" and len(rest) > 1):
            raise TemplateSyntaxError(f"${{{text}}}: unknown loop field",
                                      "write ${loop.index} or ${loop.previous}")
        return Ref("loop", str(rest[0]), "", tuple(rest[1:]), text)
    if root == "workflow":
        if len(rest) != 1 or rest[0] not in WORKFLOW_FIELDS:
            raise TemplateSyntaxError(f"${{{text}}}: unknown workflow field",
                                      "write ${workflow.dir} or ${workflow.name}")
        return Ref("workflow", str(rest[0]), "", (), text)
    raise TemplateSyntaxError(f"${{{text}}}: unknown reference root {root!r}",
                              "references start with inputs., steps., item, loop., output "
                              "or workflow." + _suggest([root], ROOTS))


def _suggest(got: list[str | int], known: tuple[str, ...]) -> str:
    if not got or not isinstance(got[0], str):
        return ""
    close = difflib.get_close_matches(got[0], known, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def has_template(text: str) -> bool:
    """Whether ``text`` holds a reference or an escape (else it is a plain literal)."""
    return "${" in text


def parse_nested(value: Any) -> Any:
    """``value`` with every string that holds ``${`` replaced by its :class:`Template`."""
    if isinstance(value, str):
        return parse_template(value) if has_template(value) else value
    if isinstance(value, Mapping):
        return {k: parse_nested(v) for k, v in value.items()}
    if isinstance(value, list):
        return [parse_nested(v) for v in value]
    return value


def nested_templates(value: Any) -> Iterator[Template]:
    """Every :class:`Template` inside a value built by :func:`parse_nested`."""
    if isinstance(value, Template):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from nested_templates(item)
    elif isinstance(value, list):
        for item in value:
            yield from nested_templates(item)


def render_nested(value: Any, resolve: Resolver) -> Any:
    """Render every :class:`Template` inside a value built by :func:`parse_nested`."""
    if isinstance(value, Template):
        return value.render(resolve)
    if isinstance(value, Mapping):
        return {k: render_nested(v, resolve) for k, v in value.items()}
    if isinstance(value, list):
        return [render_nested(v, resolve) for v in value]
    return value


def follow(value: Any, path: tuple[str | int, ...], *, what: str,
           lenient: bool = False) -> Any:
    """Apply ``path`` to ``value``. Missing keys raise :class:`TemplateError` naming
    ``what``; with ``lenient`` a path through ``None`` gives ``None`` (conditions)."""
    for depth, key in enumerate(path):
        if value is None and lenient:
            return None
        if isinstance(value, Mapping):
            if key in value:
                value = value[key]
                continue
            if str(key) in value:
                value = value[str(key)]
                continue
            where = _dotted(path[:depth])
            raise TemplateError(f"{what}{where} has no key {key!r}; its keys are "
                                f"{sorted(map(str, value)) or 'none'}")
        if isinstance(value, list | tuple):
            if isinstance(key, int) and -len(value) <= key < len(value):
                value = value[key]
                continue
            where = _dotted(path[:depth])
            raise TemplateError(f"{what}{where} is a list of {len(value)} item(s); "
                                f"{key!r} is not an index in it")
        where = _dotted(path[:depth])
        raise TemplateError(f"{what}{where} is {_kind(value)}, so it has no {key!r}")
    return value


def _dotted(path: tuple[str | int, ...]) -> str:
    return "".join(f".{p}" for p in path)


def _kind(value: Any) -> str:
    return "null" if value is None else f"a {type(value).__name__} ({to_text(value)[:40]!r})"


def to_text(value: Any) -> str:
    """How a value reads inside a longer string."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump_json()
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)
