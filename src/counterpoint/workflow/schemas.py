"""An agent's ``output:`` spec in a workflow file, turned into a pydantic model.

Two spellings, mixable per field:

* shorthand: ``{title: string, points: "list[string]", note: "string?"}`` (``?``
  makes a field optional, ``None`` when absent);
* JSON-schema-ish: ``{type: object, properties: {...}, required: [...]}`` and per
  field ``{type, description, items, properties, enum, minItems, maxItems,
  minLength, maxLength, pattern}`` (``pattern``: a regular expression the whole string
  must match, written ``^...$``).

Types: ``string``, ``integer``, ``number``, ``boolean``, ``object``, ``list``
(or ``array``), ``list[T]``. A string ``module:Class`` / ``file.py:Class`` names a
Python type instead (resolved by :mod:`.imports`).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import pydantic
import pydantic_core

from .yamlsource import KeyPath

SCALARS: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool,
                           "object": dict[str, Any]}
LISTS = ("list", "array")
FIELD_KEYS = ("type", "description", "items", "properties", "required", "enum", "minItems",
              "maxItems", "minLength", "maxLength", "pattern")
_LIST_OF = re.compile(r"(?:list|array)\[(.+)\]")
_CONSTRAINTS = {"minItems": "min_length", "maxItems": "max_length",
                "minLength": "min_length", "maxLength": "max_length"}


class SchemaProblem(Exception):
    """An output spec is invalid at ``at`` (relative to the ``output:`` key)."""

    def __init__(self, at: KeyPath, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.at = at
        self.message = message
        self.hint = hint


def model_from_spec(spec: Mapping[str, Any], name: str) -> type[pydantic.BaseModel]:
    """The pydantic model an ``output:`` mapping describes; raises :class:`SchemaProblem`."""
    if spec.get("type") == "object" or "properties" in spec:
        return _object(spec, name, ())
    if not spec:
        raise SchemaProblem((), "output spec has no fields",
                            "list fields, e.g. {title: string, points: 'list[string]'}")
    return _model(name, {str(k): (v, True) for k, v in spec.items()}, ())


def _object(spec: Mapping[str, Any], name: str, at: KeyPath) -> type[pydantic.BaseModel]:
    unknown = sorted(set(spec) - set(FIELD_KEYS))
    if unknown:
        raise SchemaProblem((*at, unknown[0]), f"unknown key {unknown[0]!r} in an object "
                            "spec", _closest(unknown[0], FIELD_KEYS))
    props = spec.get("properties")
    if not isinstance(props, Mapping) or not props:
        raise SchemaProblem(at, "an object spec needs properties: {name: type, ...}")
    required = spec.get("required")
    if required is None:
        required = list(props)
    if not isinstance(required, list) or not all(r in props for r in required):
        raise SchemaProblem((*at, "required"), "required must list property names",
                            f"properties: {sorted(props)}")
    fields = {str(k): (v, k in required) for k, v in props.items()}
    return _model(name, fields, (*at, "properties"))


def _model(name: str, fields: Mapping[str, tuple[Any, bool]],
           at: KeyPath) -> type[pydantic.BaseModel]:
    definitions: dict[str, Any] = {}
    for field, (spec, required) in fields.items():
        if not field.isidentifier() or field.startswith("_"):
            raise SchemaProblem((*at, field), f"field name {field!r} is not an identifier",
                                "use letters, digits and _ (not leading)")
        annotation, info = _field(spec, (*at, field), f"{name}_{field}")
        optional = not required
        if isinstance(spec, str) and spec.endswith("?"):
            optional = True
        if optional:
            annotation = annotation | None
            info["default"] = None
        definitions[field] = (annotation, pydantic.Field(**info))
    model: type[pydantic.BaseModel] = pydantic.create_model(_class_name(name), **definitions)
    return model


def _field(spec: Any, at: KeyPath, name: str) -> tuple[Any, dict[str, Any]]:
    if isinstance(spec, str):
        return _named_type(spec.removesuffix("?").strip(), at, name), {}
    if not isinstance(spec, Mapping):
        raise SchemaProblem(at, f"expected a type name or a field spec, got {spec!r}",
                            "write e.g. string, 'list[string]' or {type: string}")
    unknown = sorted(set(spec) - set(FIELD_KEYS))
    if unknown:
        raise SchemaProblem((*at, unknown[0]), f"unknown key {unknown[0]!r} in a field spec",
                            _closest(unknown[0], FIELD_KEYS))
    kind = spec.get("type")
    info: dict[str, Any] = {}
    if "description" in spec:
        info["description"] = str(spec["description"])
    for key, option in _CONSTRAINTS.items():
        if key in spec:
            if not isinstance(spec[key], int) or spec[key] < 0:
                raise SchemaProblem((*at, key), f"{key} must be a whole number >= 0")
            info[option] = spec[key]
    if "pattern" in spec:
        if kind != "string":
            raise SchemaProblem((*at, "pattern"), "pattern applies to a string field only",
                                "add type: string, or remove pattern")
        info["pattern"] = _pattern(spec["pattern"], (*at, "pattern"))
    if "enum" in spec:
        values = spec["enum"]
        if not isinstance(values, list) or not values:
            raise SchemaProblem((*at, "enum"), "enum must be a non-empty list of values")
        return Literal[tuple(values)], info
    if kind == "object" or (kind is None and "properties" in spec):
        if "properties" in spec:
            return _object({k: v for k, v in spec.items() if k != "description"}, name,
                           at), info
        return dict[str, Any], info
    if kind in LISTS:
        items = spec.get("items")
        item_type: Any = Any
        if items is not None:
            item_type, item_info = _field(items, (*at, "items"), f"{name}_item")
            if item_info:  # constraints on each item (maxLength, ...)
                item_type = Annotated[item_type, pydantic.Field(**item_info)]
        return _list_of(item_type), info
    if not isinstance(kind, str):
        raise SchemaProblem(at, "a field spec needs a type", "add type: string (or integer, "
                            "number, boolean, object, list)")
    return _named_type(kind, (*at, "type"), name), info


def _pattern(pattern: Any, at: KeyPath) -> str:
    """A field's ``pattern``, checked: a string, anchored at both ends (the whole answer
    must match it, which is also what a model's constrained decoder enforces), and a valid
    regular expression."""
    if not isinstance(pattern, str) or not pattern:
        raise SchemaProblem(at, f"pattern must be a regular expression, got {pattern!r}",
                            "write e.g. pattern: '^[A-Z][a-z ]+$'")
    if not (pattern.startswith("^") and pattern.endswith("$")) or pattern.endswith("\\$"):
        bare = pattern.strip("^$")
        raise SchemaProblem(at, f"pattern {pattern!r} must match the whole string: start it "
                            "with ^ and end it with $",
                            f"write '^{bare}$' (or '^.*{bare}.*$' to find it anywhere)")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise SchemaProblem(at, f"pattern {pattern!r} is not a valid regular expression: "
                            f"{exc}") from None
    try:  # answers are checked by pydantic's regex engine, which has no look-arounds
        pydantic.TypeAdapter(Annotated[str, pydantic.Field(pattern=pattern)])
    except pydantic_core.SchemaError as exc:  # syntax its engine lacks
        reason = str(exc).strip().splitlines()[-1].strip() or type(exc).__name__
        raise SchemaProblem(at, f"pattern {pattern!r} uses syntax answers cannot be checked "
                            f"with ({reason})", "write it without look-arounds ((?=, (?!, "
                            "(?<=, (?<!) and back-references (\\1)") from None
    return pattern


def _named_type(text: str, at: KeyPath, name: str) -> Any:
    if text in SCALARS:
        return SCALARS[text]
    if text in LISTS:
        return list[Any]
    inner = _LIST_OF.fullmatch(text)
    if inner:
        return _list_of(_named_type(inner.group(1).strip(), at, name))
    raise SchemaProblem(at, f"unknown type {text!r}",
                        "types are string, integer, number, boolean, object, list, list[T]"
                        + _did_you_mean(text, (*SCALARS, *LISTS)))


def _list_of(item: Any) -> Any:
    return list.__class_getitem__(item)


def _closest(word: str, known: tuple[str, ...]) -> str:
    return f"allowed: {', '.join(known)}" + _did_you_mean(word, known)


def _did_you_mean(word: str, known: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(word, known, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _class_name(name: str) -> str:
    words = re.split(r"[^A-Za-z0-9]+", name)
    text = "".join(w[:1].upper() + w[1:] for w in words if w)
    return text if text and not text[0].isdigit() else f"Output{text}"
