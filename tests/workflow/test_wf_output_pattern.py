"""``pattern`` on a string field of an agent's ``output:``: sent to the model in the
schema (a constrained decoder enforces it as it writes), checked on every answer, and
refused before anything runs when it is not one the whole answer can be matched with."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

import counterpoint as cp
from counterpoint.models import Request, ScriptedModel
from counterpoint.workflow import WorkflowError, load_workflow

POINT = "^[A-Z][a-z ]{1,20}$"


def write(folder: Path, pattern: object, *, field_type: str = "string") -> tuple[Path, str]:
    body = textwrap.dedent(f"""\
        name: patterned
        agents:
          extractor:
            instructions: Extract.
            output:
              points:
                type: list
                items: {{type: {field_type}, pattern: {pattern!r}}}
        steps:
          extract: {{agent: extractor, task: Two points.}}
        output: extract
        """)
    path = folder / "wf.yaml"
    path.write_text(body)
    return path, body


def test_a_pattern_goes_to_the_model_and_an_answer_that_breaks_it_is_asked_again(
        tmp_path: Path) -> None:
    seen: list[Request] = []

    def answer(text: str):  # type: ignore[no-untyped-def]
        def reply(request: Request) -> str:
            seen.append(request)
            return text
        return reply

    model = ScriptedModel([answer('{"points": ["Roofs", "key_points_1_1_1"]}'),
                           answer('{"points": ["Roofs", "Flowers in parks"]}')])
    path, _ = write(tmp_path, POINT)
    wf = load_workflow(path, models={"*": model})
    result = cp.run_sync(wf.graph, store="memory")
    assert result.ok, result.nodes
    assert result.output == {"points": ["Roofs", "Flowers in parks"]}
    assert len(seen) == 2  # the first answer broke the pattern: it was asked again
    assert seen[0].output is not None
    assert seen[0].output.schema_["properties"]["points"]["items"]["pattern"] == POINT


@pytest.mark.parametrize(("pattern", "message", "hint"), [
    ("[A-Z]", "pattern '[A-Z]' must match the whole string: start it with ^ and end it "
     "with $", "write '^[A-Z]$' (or '^.*[A-Z].*$' to find it anywhere)"),
    ("^(ab$", "pattern '^(ab$' is not a valid regular expression: missing ), unterminated "
     "subpattern at position 1", ""),
    ("^(?=A)[A-Z]+$", "pattern '^(?=A)[A-Z]+$' uses syntax answers cannot be checked with "
     "(error: look-around, including look-ahead and look-behind, is not supported)",
     "write it without look-arounds"),
    (7, "pattern must be a regular expression, got 7", "write e.g. pattern:"),
])
def test_a_pattern_that_cannot_match_whole_answers_is_refused_at_its_line(
        tmp_path: Path, pattern: object, message: str, hint: str) -> None:
    path, body = write(tmp_path, pattern)
    with pytest.raises(WorkflowError) as caught:
        load_workflow(path)
    [problem] = caught.value.problems
    line = next(n for n, text in enumerate(body.splitlines(), 1) if "pattern:" in text)
    assert problem.where == f"{path}:{line}"
    assert problem.message == f"agent 'extractor': {message}"
    assert problem.hint.startswith(hint)


def test_a_pattern_on_a_field_that_is_not_a_string_is_refused(tmp_path: Path) -> None:
    path, _ = write(tmp_path, POINT, field_type="integer")
    with pytest.raises(WorkflowError) as caught:
        load_workflow(path)
    [problem] = caught.value.problems
    assert problem.message == "agent 'extractor': pattern applies to a string field only"
    assert problem.hint == "add type: string, or remove pattern"
