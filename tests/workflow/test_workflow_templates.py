"""Workflow templates and conditions: parsing, typed rendering, safe evaluation."""

from __future__ import annotations

from typing import Any

import pytest

from counterpoint.workflow.conditions import ConditionError, parse_condition
from counterpoint.workflow.templates import (
    Ref,
    TemplateError,
    TemplateSyntaxError,
    follow,
    parse_ref,
    parse_template,
    to_text,
)

VALUES: dict[str, Any] = {"inputs.n": 3, "inputs.name": "tea", "steps.a.output": ["x", "y"],
                          "steps.b.output": None, "item": {"title": "T", "tags": ["p", "q"]}}


def resolve(ref: Ref) -> Any:
    key = f"{ref.root}.{ref.name}.{ref.field}" if ref.root == "steps" else \
        (f"inputs.{ref.name}" if ref.root == "inputs" else ref.root)
    return follow(VALUES[key], ref.path, what=f"${{{ref.text}}}", lenient=True)


def test_references_parse_into_root_name_field_and_path() -> None:
    assert parse_ref("steps.extract.output.points.0") == Ref(
        "steps", "extract", "output", ("points", 0), "steps.extract.output.points.0")
    assert parse_ref(" inputs.topic ") == Ref("inputs", "topic", "", (), "inputs.topic")
    assert parse_ref("item.title") == Ref("item", "", "", ("title",), "item.title")
    assert parse_ref("loop.previous.score").path == ("score",)
    assert parse_ref("workflow.dir").name == "dir"
    assert parse_ref("steps.my-step.iterations").field == "iterations"


@pytest.mark.parametrize(("text", "message"), [
    ("", "empty reference"),
    ("inputs", "names no input"),
    ("steps.a", "expected 'output' or 'iterations'"),
    ("steps.a.outptu", "expected 'output' or 'iterations'"),
    ("loop.count", "unknown loop field"),
    ("workflow.path", "unknown workflow field"),
    ("inputs.a..b", "empty path segment"),
    ("inputs.a b", "not a valid path segment"),
    ("input.a", "unknown reference root 'input'"),
])
def test_malformed_references_say_how_to_write_them(text: str, message: str) -> None:
    with pytest.raises(TemplateSyntaxError, match=message) as caught:
        parse_ref(text)
    assert caught.value.hint


def test_a_single_reference_keeps_its_type_a_longer_template_renders_text() -> None:
    assert parse_template("${steps.a.output}").render(resolve) == ["x", "y"]
    assert parse_template("${inputs.n}").render(resolve) == 3
    assert parse_template("n=${inputs.n} a=${steps.a.output} b=[${steps.b.output}]").render(
        resolve) == 'n=3 a=["x", "y"] b=[]'
    assert parse_template("${item.tags.1}!").render(resolve) == "q!"
    assert parse_template("$${inputs.n} costs $5").render(resolve) == "${inputs.n} costs $5"
    assert parse_template("plain").single is None
    with pytest.raises(TemplateSyntaxError, match="unclosed"):
        parse_template("a ${inputs.n")


def test_text_rendering_of_values() -> None:
    assert [to_text(v) for v in (None, True, False, 2, 2.5, "s", {"k": "é"})] == [
        "", "true", "false", "2", "2.5", "s", '{"k": "é"}']


def test_missing_paths_name_the_reference_and_the_keys_there() -> None:
    with pytest.raises(TemplateError, match=r"\$\{x\}.meta has no key 'nope'; its keys are "
                                            r"\['n'\]"):
        follow({"meta": {"n": 1}}, ("meta", "nope"), what="${x}")
    with pytest.raises(TemplateError, match="is a list of 2 item"):
        follow([1, 2], (5,), what="${x}")
    with pytest.raises(TemplateError, match="is null, so it has no 'a'"):
        follow(None, ("a",), what="${x}")
    assert follow(None, ("a", "b"), what="${x}", lenient=True) is None
    assert follow({"1": "one"}, (1,), what="${x}") == "one"


@pytest.mark.parametrize(("text", "expected"), [
    ("${inputs.n} == 3", True),
    ("${inputs.n} > 1 and ${inputs.n} <= 3", True),
    ("1 < ${inputs.n} < 3", False),
    ("not ${inputs.n} != 3", True),
    ("'x' in ${steps.a.output}", True),
    ("'z' not in ${steps.a.output}", True),
    ("len(${steps.a.output}) == 2 or false", True),
    ("${steps.b.output} == null", True),
    ("${steps.b.output.deep} == None", True),
    ("${inputs.name} in ['tea', 'coffee']", True),
    ("${inputs.n} == -3", False),
    ("${inputs.n}", True),
    ("${item.title} == 'T' and true", True),
])
def test_conditions_evaluate(text: str, expected: bool) -> None:
    assert parse_condition(text).evaluate(resolve) is expected


@pytest.mark.parametrize(("text", "message"), [
    ("__import__('os')", "only len"),
    ("${inputs.n}.real", "attribute access"),
    ("${inputs.n} + 1 > 2", "arithmetic"),
    ("${steps.a.output}[0] == 'x'", "indexing"),
    ("x == 1", "unknown name 'x'"),
    ("len == 1", "len must be called"),
    ("len(1, 2)", "only len"),
    ("(lambda: 1)()", "only len"),
    ("{'a': 1}", "a dict literal"),
    ("1 if true else 2", "if/else"),
    ("", "empty condition"),
    ("${inputs.n} ==", "not a valid expression"),
    ("b'x' == 1", "literal b'x' is not allowed"),
])
def test_conditions_allow_only_the_whitelist(text: str, message: str) -> None:
    with pytest.raises(TemplateSyntaxError, match=message):
        parse_condition(text)


def test_a_condition_that_cannot_be_evaluated_says_why_with_the_values() -> None:
    condition = parse_condition("${steps.b.output} > 2")
    with pytest.raises(ConditionError, match=r"cannot be evaluated: '>' not supported .* "
                                             r"\(with \$\{steps.b.output\} = None\)"):
        condition.evaluate(resolve)
