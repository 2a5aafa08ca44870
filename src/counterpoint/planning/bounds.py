"""Size bounds on what the planning roles answer, and how long such an answer can get.

Every string and list a role writes as structured output has a bound in its JSON schema
(``maxLength``, ``maxItems``): a provider with constrained decoding (llama.cpp's grammar,
which the embedded model uses) cannot write past it, so a small model that repeats itself
ends its JSON instead of running into the token limit with the JSON cut off. Reading is
lenient: an answer from a provider that does not constrain its output and goes past a
bound is cut visibly (a string ends in ``…``, a list keeps its first items) rather than
rejected, since a longer answer from a strong model is not a wrong one.

:func:`worst_case_chars` gives the longest JSON a schema allows, so a role's token limit
can be checked against its answer (:data:`CHARS_PER_TOKEN`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, core_schema

TASK_CHARS = 200
"""A subtask's task (or a redone task): one or two sentences."""
EXPECTED_CHARS = 120
"""What a subtask's result should contain."""
PROBLEM_CHARS = 200
"""One gap the verifier found."""
ID_CHARS = 12
"""A subtask id a role names (``t1``, ``t3.r1``)."""
TAG_CHARS = 16
"""A skill tag the planner gives a subtask (``math``, ``code``), for routing."""
MAX_TAGS = 2
"""Skill tags of one subtask: one or two name the skill; more would be padding."""
MAX_GAPS = 4
"""Gaps one verdict lists: the worst few are enough to re-plan from."""
CHARS_PER_TOKEN = 2
"""A floor on characters per generated token, for checking a token limit against a bound:
English text runs at 3-4 characters per token; JSON punctuation and digits at about 1-2."""


@dataclass(frozen=True, slots=True)
class MaxChars:
    """``Annotated[str, MaxChars(n)]``: ``maxLength: n`` in the schema; a longer string
    read is cut to ``n`` characters, ending in ``…``."""

    limit: int

    def __get_pydantic_core_schema__(self, source: Any,
                                     handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_before_validator_function(self._cut, handler(source))

    def __get_pydantic_json_schema__(self, core: CoreSchema,
                                     handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return {**handler(core), "maxLength": self.limit}

    def _cut(self, value: Any) -> Any:
        if isinstance(value, str) and len(value) > self.limit:
            return value[:self.limit - 1].rstrip() + "…"
        return value


@dataclass(frozen=True, slots=True)
class MaxItems:
    """``Annotated[list[X], MaxItems(n)]``: ``maxItems: n`` in the schema; a longer list
    read keeps its first ``n`` items."""

    limit: int

    def __get_pydantic_core_schema__(self, source: Any,
                                     handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_before_validator_function(self._first, handler(source))

    def __get_pydantic_json_schema__(self, core: CoreSchema,
                                     handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return {**handler(core), "maxItems": self.limit}

    def _first(self, value: Any) -> Any:
        return value[:self.limit] if isinstance(value, list) else value


def fitted_tokens(schema: dict[str, Any]) -> int | None:
    """Tokens enough for the longest answer ``schema`` allows, at :data:`CHARS_PER_TOKEN`
    (``None`` when it is unbounded)."""
    chars = worst_case_chars(schema)
    return None if chars is None else -(-chars // CHARS_PER_TOKEN) + 16  # + end of turn


def worst_case_chars(schema: dict[str, Any]) -> int | None:
    """The longest JSON ``schema`` allows, in characters (compact, keys and punctuation
    included); ``None`` when something in it is unbounded."""
    return _longest(schema, schema.get("$defs", {}))


def _longest(node: dict[str, Any], defs: dict[str, Any]) -> int | None:
    if "$ref" in node:
        return _longest(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
    for key in ("anyOf", "oneOf"):
        if key in node:
            options = [_longest(o, defs) for o in node[key]]
            return None if None in options else max(o for o in options if o is not None)
    if "enum" in node or "const" in node:
        values = node.get("enum", [node.get("const")])
        return max(len(json.dumps(v)) for v in values)
    kind = node.get("type")
    if kind == "string":
        limit = node.get("maxLength")
        # maxLength counts characters; an escaped one (\n, \") is two in the JSON, which
        # a decoder writes rarely enough that the floor on characters per token covers it
        return None if limit is None else int(limit) + 2
    if kind in ("integer", "number"):
        return 24
    if kind == "boolean":
        return 5
    if kind == "null":
        return 4
    if kind == "array" and "prefixItems" in node:  # a tuple: its items, then none
        if node.get("items", False) is not False:
            return None
        sizes = [_longest(item, defs) for item in node["prefixItems"]]
        return None if None in sizes else 2 + sum(s + 1 for s in sizes if s is not None)
    if kind == "array":
        count = node.get("maxItems")
        inner = _longest(node.get("items", {}), defs)
        return None if count is None or inner is None else 2 + int(count) * (inner + 1)
    if kind == "object":
        total = 2
        for name, prop in node.get("properties", {}).items():
            size = _longest(prop, defs)
            if size is None:
                return None
            total += len(name) + 4 + size
        return total
    return None

