"""Conditions (``when:``, ``loop.until:``): a small expression language, never ``eval``.

Allowed: ``${...}`` references, literals (strings, numbers, ``true``/``false``/
``null`` and their Python spellings, lists), comparisons (``== != < <= > >=``),
``in`` / ``not in``, ``and`` / ``or`` / ``not``, unary minus, parentheses and
``len(x)``. The text is parsed with :mod:`ast` after each reference is replaced
by a placeholder name, and every node of the tree is checked against that
whitelist; evaluation walks the checked tree.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .templates import Ref, TemplateSyntaxError, parse_template

_PLACEHOLDER = "__ref{}__"
_NAMES: dict[str, Any] = {"true": True, "false": False, "null": None, "none": None,
                          "True": True, "False": False, "None": None}
_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}
HINT = ("conditions allow ${...} references, literals, == != < <= > >=, in, and/or/not and "
        "len(...)")


class ConditionError(ValueError):
    """A condition could not be evaluated (e.g. ``<`` between a number and null)."""


@dataclass(frozen=True, slots=True)
class Condition:
    """A checked condition, ready to evaluate."""

    source: str
    tree: ast.Expression
    refs: dict[str, Ref]
    """Placeholder name -> the reference it stands for."""

    def evaluate(self, resolve: Callable[[Ref], Any]) -> bool:
        """The condition's truth, given the value of each reference.

        Raises :class:`ConditionError` when an operation does not apply to its values.
        """
        values = {name: resolve(ref) for name, ref in self.refs.items()}
        try:
            return bool(_eval(self.tree.body, values))
        except (TypeError, ValueError) as exc:
            shown = ", ".join(f"${{{r.text}}} = {values[n]!r}" for n, r in self.refs.items())
            raise ConditionError(f"condition {self.source!r} cannot be evaluated: {exc}"
                                 + (f" (with {shown})" if shown else "")) from None


def parse_condition(text: str) -> Condition:
    """Parse and check ``text``; raises :class:`TemplateSyntaxError` with a hint."""
    template = parse_template(text)
    code: list[str] = []
    refs: dict[str, Ref] = {}
    for part in template.parts:
        if isinstance(part, Ref):
            name = _PLACEHOLDER.format(len(refs))
            refs[name] = part
            code.append(f" {name} ")
        else:
            code.append(part)
    source = "".join(code).strip()
    if not source:
        raise TemplateSyntaxError("empty condition", HINT)
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        raise TemplateSyntaxError(f"condition {text!r} is not a valid expression "
                                  f"({exc.msg})", HINT) from None
    callees = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == "len" and id(node) not in callees:
            raise TemplateSyntaxError(f"condition {text!r}: len must be called: len(x)", HINT)
        _check(node, refs, text)
    return Condition(source=text, tree=tree, refs=refs)


_ALLOWED = (ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub,
            ast.UAdd, ast.Compare, ast.Constant, ast.Name, ast.Load, ast.List, ast.Tuple,
            ast.Call, *_COMPARE)


def _check(node: ast.AST, refs: dict[str, Ref], text: str) -> None:
    if not isinstance(node, _ALLOWED):
        raise TemplateSyntaxError(f"condition {text!r}: {_describe(node)} is not allowed", HINT)
    if isinstance(node, ast.Name) and node.id not in refs and node.id not in _NAMES \
            and node.id != "len":
        raise TemplateSyntaxError(f"condition {text!r}: unknown name {node.id!r}",
                                  f"write references as ${{inputs.{node.id}}} or "
                                  f"${{steps.{node.id}.output}}; quote text: '{node.id}'")
    if isinstance(node, ast.Name) and node.id == "len":
        return  # checked as the function of a call below
    if isinstance(node, ast.Call) and (
            not (isinstance(node.func, ast.Name) and node.func.id == "len")
            or len(node.args) != 1 or node.keywords):
        raise TemplateSyntaxError(f"condition {text!r}: only len(x) may be called", HINT)
    if isinstance(node, ast.Constant) and not isinstance(node.value, str | int | float | bool
                                                         | None):
        raise TemplateSyntaxError(f"condition {text!r}: literal {node.value!r} is not "
                                  "allowed", HINT)


def _describe(node: ast.AST) -> str:
    names = {ast.Attribute: "attribute access (use a ${...} path)",
             ast.BinOp: "arithmetic", ast.Subscript: "indexing (use a ${...} path)",
             ast.Lambda: "lambda", ast.IfExp: "if/else", ast.Dict: "a dict literal"}
    for kind, label in names.items():
        if isinstance(node, kind):
            return label
    return type(node).__name__


def _eval(node: ast.AST, values: dict[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return values[node.id] if node.id in values else _NAMES[node.id]
    if isinstance(node, ast.BoolOp):
        if isinstance(node.op, ast.And):
            result: Any = True
            for item in node.values:
                result = _eval(item, values)
                if not result:
                    return result
            return result
        result = False
        for item in node.values:
            result = _eval(item, values)
            if result:
                return result
        return result
    if isinstance(node, ast.UnaryOp):
        operand = _eval(node.operand, values)
        if isinstance(node.op, ast.Not):
            return not operand
        if isinstance(node.op, ast.USub):
            return -operand
        return +operand
    if isinstance(node, ast.Compare):
        left = _eval(node.left, values)
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = _eval(right_node, values)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.List | ast.Tuple):
        return [_eval(item, values) for item in node.elts]
    if isinstance(node, ast.Call):
        return len(_eval(node.args[0], values))
    raise TypeError(f"unsupported expression {type(node).__name__}")  # unreachable: checked
