"""Every mistake in a workflow file is reported before anything runs, with file:line and
a hint, and all problems of a file are reported together."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from counterpoint.cli.app import app
from counterpoint.workflow import WorkflowError, load_workflow

HELPERS = '''
def echo(value):
    return value


def add(a: int, b: int = 1) -> int:
    return a + b


value = 3
'''


def write(folder: Path, text: str, name: str = "wf.yaml") -> tuple[Path, str]:
    (folder / "helpers.py").write_text(HELPERS)
    body = textwrap.dedent(text).lstrip()
    path = folder / name
    path.write_text(body)
    return path, body


def line_of(body: str, needle: str) -> int:
    """The 1-based line of the first line of ``body`` containing ``needle``."""
    for number, line in enumerate(body.splitlines(), start=1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} not in the workflow")


def problems(path: Path) -> str:
    with pytest.raises(WorkflowError) as caught:
        load_workflow(path)
    return str(caught.value)


def at(path: Path, body: str, needle: str) -> str:
    return f"{path}:{line_of(body, needle)}: "


def test_unknown_step_agent_and_input_suggest_the_closest_name(tmp_path: Path) -> None:
    path, body = write(tmp_path, """
        name: typos
        inputs:
          topic: string
        agents:
          writer: {instructions: Write.}
        steps:
          extract:
            python: helpers.py:echo
            args: {value: "${inputs.topc}"}
          write:
            agent: writr
            task: "Use ${steps.extrct.output.title}"
        """)
    text = problems(path)
    assert text.startswith(f"{path}: 3 problems:\n")
    assert (at(path, body, "inputs.topc") + "step 'extract': ${inputs.topc}: unknown input "
            "'topc'; did you mean 'topic'? (inputs: topic)") in text
    assert (at(path, body, "agent: writr") + "step 'write': unknown agent 'writr'; did you "
            "mean 'writer'? (agents: writer)") in text
    assert (at(path, body, "extrct") + "step 'write': ${steps.extrct.output.title}: unknown "
            "step 'extrct'; did you mean 'extract'? (steps: extract, write)") in text


def test_a_cycle_is_printed_in_order(tmp_path: Path) -> None:
    path, body = write(tmp_path, """
        name: cyclic
        steps:
          a:
            python: helpers.py:echo
            args: {value: "${steps.b.output}"}
          b:
            python: helpers.py:echo
            args: {value: "x"}
            needs: [a]
        """)
    assert problems(path) == at(path, body, "  a:") + "steps form a cycle: a -> b -> a; " \
        "remove one of these references or needs"


def test_missing_required_input_says_how_to_pass_it(tmp_path: Path) -> None:
    path, body = write(tmp_path, """
        name: needs-topic
        inputs:
          topic: {type: string, description: What to write about}
          count: {type: integer, default: 2}
        steps:
          s: {python: helpers.py:echo, args: {value: "${inputs.topic}"}}
        """)
    wf = load_workflow(path)
    with pytest.raises(WorkflowError) as caught:
        wf.bind_inputs({})
    assert str(caught.value) == (
        at(path, body, "topic:") + "workflow 'needs-topic' needs input 'topic' (string: What "
        "to write about); pass it with --input topic=VALUE (from Python: "
        "inputs={'topic': ...})")
    with pytest.raises(WorkflowError) as caught:
        wf.bind_inputs({"topic": "x", "count": "many", "cuont": 3})
    text = str(caught.value)
    assert f"{path}: workflow 'needs-topic' has no input 'cuont'; did you mean 'count'?" in text
    assert at(path, body, "count:") + "input 'count' expects a whole number, got 'many'; " \
        "pass an integer value: --input count=VALUE" in text


def test_bad_template_syntax(tmp_path: Path) -> None:
    path, body = write(tmp_path, """
        name: templates
        steps:
          a:
            python: helpers.py:echo
            args: {value: "${inputs.x"}
          b:
            python: helpers.py:echo
            args: {value: "${steps.a}"}
          c:
            python: helpers.py:echo
            args: {value: "${stesp.a.output}"}
        """)
    text = problems(path)
    assert at(path, body, "${inputs.x") + "bad template: unclosed ${ in '${inputs.x'; close " \
        "the reference with }, or write $${ for a literal ${" in text
    assert at(path, body, "${steps.a}") + "bad template: ${steps.a}: expected 'output' or " \
        "'iterations' after the step id, got nothing; write ${steps.a.output}" in text
    assert at(path, body, "stesp") + "bad template: ${stesp.a.output}: unknown reference " \
        "root 'stesp'; references start with inputs., steps., item, loop., output or " \
        "workflow. (did you mean 'steps'?)" in text


def test_unknown_keys_suggest_the_closest_allowed_key(tmp_path: Path) -> None:
    path, body = write(tmp_path, """
        name: keys
        agents:
          w: {instructions: Write., max_turn: 2}
        steps:
          s:
            agent: w
            tsk: Write.
            loop: {max: 2, untill: "true"}
        outptu: s
        """)
    text = problems(path)
    assert at(path, body, "tsk:") + "step 's': unknown key 'tsk'; did you mean 'task'?" in text
    assert at(path, body, "max_turn") + "agent 'w': unknown key 'max_turn'; did you mean " \
        "'max_turns'?" in text
    assert at(path, body, "untill") + "step 's': loop: unknown key 'untill'; did you mean " \
        "'until'? (allowed keys: max, until)" in text
    assert at(path, body, "outptu") + "workflow: unknown key 'outptu'; did you mean " \
        "'output'?" in text


def test_a_step_runs_exactly_one_thing(tmp_path: Path) -> None:
    path, body = write(tmp_path, """
        name: kinds
        agents:
          w: {}
        steps:
          none:
            args: {value: 1}
          two:
            agent: w
            python: helpers.py:echo
            task: Do.
          misplaced:
            agent: w
            task: Do.
            args: {value: 1}
        """)
    text = problems(path)
    assert at(path, body, "none:") + "step 'none' does not say what to run; give it one of " \
        "agent:, tool:, python:, workflow: or first_of:" in text
    assert at(path, body, "python: helpers.py:echo") + "step 'two' has both agent: and " \
        "python:; a step runs one thing; split it into two steps" in text
    lines = body.splitlines()
    args_line = max(i for i, line in enumerate(lines, start=1) if "args:" in line)
    assert f"{path}:{args_line}: step 'misplaced': args: applies to tool: and python: " \
        "steps, not agent:; pass values to an agent through task: or context:" in text


def test_map_must_be_a_reference_and_item_belongs_to_maps(tmp_path: Path) -> None:
    path, body = write(tmp_path, """
        name: maps
        steps:
          a:
            python: helpers.py:echo
            map: "[1, 2, 3]"
            args: {value: "${item}"}
          b:
            python: helpers.py:echo
            args: {value: "${item}"}
        """)
    text = problems(path)
    assert at(path, body, "map:") + "step 'a': map must be one reference to a list, got " \
        "'[1, 2, 3]'; write map: ${steps.ID.output} or map: ${inputs.NAME}" in text
    lines = body.splitlines()
    b_args = max(i for i, line in enumerate(lines, start=1) if "${item}" in line)
    assert f"{path}:{b_args}: step 'b': ${{item}}: ${{item}} exists only in the body of a " \
        "map step; add map: ${steps.ID.output} to this step" in text


def test_python_references_that_do_not_resolve(tmp_path: Path) -> None:
    path, body = write(tmp_path, """
        name: refs
        agents:
          w:
            tools: [helpers.py:ech, missing.py:f, no_such_module_xyz:f, "helpers"]
        steps:
          a:
            python: helpers.py:value
          b:
            tool: helpers.py:add
            args: {a: 1, c: 2}
          c:
            tool: helpers.py:add
        """)
    text = problems(path)
    tools = at(path, body, "tools:")
    assert tools + "'helpers.py:ech': helpers.py has no attribute 'ech'; did you mean " \
        "'echo'?" in text
    assert tools + f"no such file 'missing.py' (looked for {tmp_path / 'missing.py'}); file " \
        "paths are relative to the workflow file's folder" in text
    assert tools + "no module named 'no_such_module_xyz'" in text
    assert tools + "'helpers' is not a Python reference; write package.module:function or " \
        "file.py:function" in text
    assert at(path, body, "helpers.py:value") + "'helpers.py:value' is not callable" in text
    assert at(path, body, "{a: 1, c: 2}") + "step 'b': tool add has no parameter 'c'" in text
    assert at(path, body, "  c:") + "step 'c': tool add needs 'a'; add args: {a: ...}" in text


def test_sub_workflow_missing_recursive_or_invalid(tmp_path: Path) -> None:
    path, body = write(tmp_path, """
        name: outer
        steps:
          missing:
            workflow: nowhere.yaml
          loop:
            workflow: inner.yaml
            inputs: {x: 1}
        """, name="outer.yaml")
    inner, inner_body = write(tmp_path, """
        name: inner
        inputs:
          x: integer
        steps:
          back:
            workflow: outer.yaml
          typo:
            python: helpers.py:echo
            args: {value: "${inputs.y}"}
        """, name="inner.yaml")
    text = problems(path)
    assert at(path, body, "nowhere.yaml") + "step 'missing': no such workflow file " \
        f"'nowhere.yaml' (looked for {tmp_path / 'nowhere.yaml'}); paths are relative to " \
        "this workflow file" in text
    assert at(inner, inner_body, "outer.yaml") + "step 'back': recursive inclusion: " \
        "outer.yaml -> inner.yaml -> outer.yaml; a workflow cannot include itself" in text
    assert at(inner, inner_body, "inputs.y") + "step 'typo': ${inputs.y}: unknown input 'y'" \
        in text
    assert at(path, body, "inner.yaml") + "step 'loop': sub-workflow 'inner.yaml' is invalid" \
        in text


def test_sub_workflow_inputs_are_checked(tmp_path: Path) -> None:
    write(tmp_path, """
        name: inner
        inputs:
          text: string
        steps:
          s: {python: helpers.py:echo, args: {value: "${inputs.text}"}}
        """, name="inner.yaml")
    path, body = write(tmp_path, """
        name: outer
        steps:
          a:
            workflow: inner.yaml
            inputs: {txt: hi}
        """)
    text = problems(path)
    assert at(path, body, "txt: hi") + "step 'a': sub-workflow 'inner' has no input 'txt'; " \
        "did you mean 'text'?" in text
    assert at(path, body, "txt: hi") + "step 'a': sub-workflow 'inner' needs input 'text'" \
        in text


def test_conditions_are_checked_not_evaluated(tmp_path: Path) -> None:
    path, body = write(tmp_path, """
        name: conditions
        inputs:
          n: integer
        steps:
          a:
            python: helpers.py:echo
            args: {value: 1}
            when: __import__('os').system('true')
          b:
            python: helpers.py:echo
            args: {value: 1}
            when: ${inputs.n} > limit
          c:
            python: helpers.py:echo
            args: {value: 1}
            when: ${inputs.n} +
        """)
    text = problems(path)
    assert at(path, body, "__import__") + "bad condition: condition " \
        "\"__import__('os').system('true')\": only len(x) may be called; conditions " \
        "allow ${...} references" in text
    assert at(path, body, "> limit") + "bad condition: condition '${inputs.n} > limit': " \
        "unknown name 'limit'; write references as ${inputs.limit}" in text
    assert at(path, body, "${inputs.n} +") + "bad condition: condition '${inputs.n} +' is " \
        "not a valid expression" in text


def test_yaml_errors_and_duplicate_keys_have_lines(tmp_path: Path) -> None:
    path, _ = write(tmp_path, """
        name: broken
        steps:
          a: {python: helpers.py:echo
        """)
    assert problems(path).startswith(f"{path}:4: invalid YAML:")
    path, _ = write(tmp_path, """
        name: dup
        steps:
          a: {python: helpers.py:echo, args: {value: 1}}
          a: {python: helpers.py:echo, args: {value: 2}}
        """)
    assert problems(path) == f"{path}:4: key 'a' appears twice (first on line 3); remove " \
        "or rename one of them"


def test_model_output_and_default_problems(tmp_path: Path) -> None:
    path, body = write(tmp_path, """
        name: misc
        inputs:
          n: {type: integer, default: many}
        agents:
          w:
            model: gpt4
            output: {title: strng}
        steps:
          a: {agent: w, task: Go.}
        output: b
        """)
    text = problems(path)
    assert at(path, body, "default: many") + "input 'n': default expects a whole number, " \
        "got 'many'" in text
    assert at(path, body, "model: gpt4") + "unknown model 'gpt4'" in text
    assert at(path, body, "strng") + "agent 'w': unknown type 'strng'; types are string, " \
        "integer, number, boolean, object, list, list[T] (did you mean 'string'?)" in text
    assert at(path, body, "output: b") + "output names unknown step 'b'" in text


def test_all_problems_are_listed_not_just_the_first(tmp_path: Path) -> None:
    path, _ = write(tmp_path, """
        name: many
        steps:
          a: {python: helpers.py:nope}
          b: {agent: nobody, task: x}
          c: {python: helpers.py:echo, args: {value: "${steps.zz.output}"}}
          d: {tool: helpers.py:add, args: {a: 1}, needs: [q]}
        """)
    with pytest.raises(WorkflowError) as caught:
        load_workflow(path)
    assert [p.where for p in caught.value.problems] == [f"{path}:{n}" for n in (3, 4, 5, 6)]
    assert all(p.hint for p in caught.value.problems)


def test_a_loop_without_max_names_the_loop_block(tmp_path: Path) -> None:
    # it said "step 'draft': missing required key 'max'", as if the step needed a max
    path, body = write(tmp_path, """
        name: looped
        steps:
          draft:
            python: helpers.py:echo
            args: {value: 1}
            loop:
              until: "true"
          empty:
            python: helpers.py:echo
            args: {value: 1}
            loop: {}
          scalar:
            python: helpers.py:echo
            args: {value: 1}
            loop: 3
        """)
    text = problems(path)
    write_loop = "write loop: {max: N, until: CONDITION}"
    assert at(path, body, "loop:") + "step 'draft': loop: missing required key 'max'; " \
        f"{write_loop}" in text
    assert at(path, body, "loop: {}") + "step 'empty': loop: missing required key 'max'; " \
        f"{write_loop}" in text
    assert at(path, body, "loop: 3") + "step 'scalar': loop must be a mapping of keys, " \
        f"got int; {write_loop}" in text


def test_a_workflow_without_name_says_what_to_add(tmp_path: Path) -> None:
    path, _ = write(tmp_path, """
        steps:
          a: {python: helpers.py:echo, args: {value: 1}}
        """)
    assert problems(path) == f"{path}:1: workflow: missing required key 'name'; add name: ..."


def test_the_cli_prints_a_loop_without_max_and_exits_2(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, _ = write(tmp_path, """
        name: looped
        steps:
          draft: {python: helpers.py:echo, args: {value: 1}, loop: {until: "true"}}
        """)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["run", path.name, "--db", str(tmp_path / "runs.db")])
    assert result.exit_code == 2, result.output
    assert result.output.startswith(f"error: {path.name}:3: step 'draft': loop: missing "
                                    "required key 'max'")
    assert "Traceback" not in result.output


def test_a_failed_top_level_does_not_hide_the_problems_of_its_parts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # with the top level invalid (no name, a bad deadline) only its problems were reported;
    # the step's, the agent's and the input's came one fix later
    path, body = write(tmp_path, """
        deadline: soon
        inputs:
          topic: {type: strng}
        agents:
          w: {instructions: Write., max_turn: 2}
        steps:
          a: {python: helpers.py:echo, tsk: x}
          b: {agent: w, task: x, loop: {until: "true"}}
        health: {failurs: 3}
        """)
    text = problems(path)
    expected = [
        at(path, body, "deadline") + "workflow: missing required key 'name'",
        at(path, body, "deadline") + "workflow: deadline: a deadline must be seconds",
        at(path, body, "strng") + "input 'topic': type:",
        at(path, body, "max_turn") + "agent 'w': unknown key 'max_turn'",
        at(path, body, "tsk") + "step 'a': unknown key 'tsk'",
        at(path, body, "loop:") + "step 'b': loop: missing required key 'max'",
        at(path, body, "failurs") + "unknown health setting 'failurs'",
    ]
    for line in expected:
        assert line in text, line
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["run", path.name, "--db", str(tmp_path / "runs.db")])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    for line in expected:
        assert line.replace(str(path), path.name) in result.output, result.output
