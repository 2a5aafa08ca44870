"""YAML workflows compiled to graphs and run: python steps, scripted agents, templates,
map, when, loop, sub-workflows, input binding and resume."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path
from typing import Any

import pytest

import counterpoint as cp
import counterpoint.workflow as cpw
from counterpoint.models import Request, ScriptedModel
from counterpoint.state import NodeStatus, RunStatus
from counterpoint.workflow import Workflow, WorkflowError, load_workflow

HELPERS = '''
import asyncio
from pathlib import Path


def info() -> dict:
    return {"title": "Hello", "tags": ["a", "b"], "meta": {"n": 3}}


def echo(value):
    return value


def numbers(n: int) -> list[int]:
    return list(range(1, n + 1))


def square(x: int) -> int:
    return x * x


def total(values: list[int]) -> int:
    return sum(values)


def count_up(previous: int | None, step: int = 1) -> int:
    return (previous or 0) + step


async def shout(text: str, suffix: str = "!") -> str:
    return text.upper() + suffix


def mark(path: str, text: str) -> str:
    with open(path, "a") as f:
        f.write(text + "\\n")
    return text


def flaky(path: str) -> str:
    marker = Path(path)
    if not marker.exists():
        marker.write_text("failed once")
        raise ConnectionError("transient")
    return "ok"


async def slow_once(path: str, value: str) -> str:
    runs = Path(path)
    first = not runs.exists()
    runs.write_text("ran")
    if first:
        await asyncio.sleep(5)
    return value.upper()
'''


def write(folder: Path, text: str, name: str = "wf.yaml") -> Path:
    """Write a workflow (and the helpers file next to it); returns its path."""
    (folder / "helpers.py").write_text(HELPERS)
    path = folder / name
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def run(wf: Workflow, **inputs: Any) -> cp.RunResult:
    return cp.run_sync(wf.graph, inputs=wf.bind_inputs(inputs), store="memory")


def test_public_api_is_pinned() -> None:
    assert sorted(cpw.__all__) == ["InputSpec", "Problem", "Workflow", "WorkflowError",
                                   "load_workflow"]


def test_python_steps_keep_types_of_single_refs_and_render_longer_templates(
        tmp_path: Path) -> None:
    wf = load_workflow(write(tmp_path, """
        name: typed
        inputs:
          count: {type: integer, default: 2}
        steps:
          info:
            python: helpers.py:info
          n:
            python: helpers.py:echo
            args: {value: "${steps.info.output.meta.n}"}
          tags:
            python: helpers.py:echo
            args: {value: "${steps.info.output.tags}"}
          second:
            python: helpers.py:echo
            args: {value: "${steps.info.output.tags.1}"}
          text:
            python: helpers.py:echo
            args:
              value: >-
                ${steps.info.output.title} x${inputs.count} ${steps.info.output.tags}
                $${literal}
          nested:
            python: helpers.py:echo
            args:
              value: {count: "${inputs.count}", items: ["${steps.info.output.title}", 7]}
        output: text
        """))
    assert wf.name == "typed" and wf.inputs["count"].type == "integer"
    assert wf.graph.nodes[cp.NodeId("n")].deps == ("info",)  # the reference made the edge
    result = run(wf)
    assert result.ok
    assert result["n"] == 3
    assert result["tags"] == ["a", "b"]
    assert result["second"] == "b"
    assert result.output == 'Hello x2 ["a", "b"] ${literal}'
    assert result["nested"] == {"count": 2, "items": ["Hello", 7]}


def test_agent_steps_render_task_and_context_and_models_are_overridden(
        tmp_path: Path) -> None:
    seen: list[Request] = []

    def answer(request: Request) -> str:
        seen.append(request)
        return '{"title": "Bees", "points": ["roofs", "flowers"]}'

    extractor = ScriptedModel([answer], name="extract-model")
    writer = ScriptedModel(["A digest."], name="writer-model")
    wf = load_workflow(write(tmp_path, """
        name: agents
        model: openai:never-called
        inputs:
          topic: string
        agents:
          extractor:
            instructions: Extract.
            output:
              title: string
              points: {type: list, items: string, maxItems: 3}
              note: string?
          writer:
            model: local:smollm2
            instructions: Write.
        steps:
          extract:
            agent: extractor
            task: "Notes on ${inputs.topic}."
            context: "About ${inputs.topic}"
          write:
            agent: writer
            model: special
            task: Write it up.
            context: [extract]
        output: write
        """), models={"openai:never-called": extractor, "special": writer})
    result = run(wf, topic="bees")
    assert result.ok, result.nodes
    assert result["extract"] == {"title": "Bees", "points": ["roofs", "flowers"], "note": None}
    assert result.output == "A digest."
    prompt = seen[0].messages[-1].content
    assert prompt.startswith("Notes on bees.") and "About bees" in prompt
    written = writer.requests[0].messages[-1].content
    assert "## extract" in written and '"title": "Bees"' in written


def test_star_overrides_every_agent_model(tmp_path: Path) -> None:
    scripted = ScriptedModel(["one"])
    wf = load_workflow(write(tmp_path, """
        name: star
        agents:
          a: {model: "openai:gpt-4.1-mini"}
        steps:
          s: {agent: a, task: Say one.}
        """), models={"*": scripted})
    assert run(wf)["s"] == "one"


def test_map_over_a_step_output_and_over_an_input(tmp_path: Path) -> None:
    wf = load_workflow(write(tmp_path, """
        name: mapping
        inputs:
          extra: {type: list, default: [4, 5]}
        steps:
          nums:
            python: helpers.py:numbers
            args: {n: 3}
          squares:
            python: helpers.py:square
            map: ${steps.nums.output}
            args: {x: "${item}"}
          more:
            python: helpers.py:square
            map: ${inputs.extra}
            args: {x: "${item}"}
          sum:
            python: helpers.py:total
            args: {values: "${steps.squares.output}"}
        output: sum
        """))
    assert wf.graph.nodes[cp.NodeId("squares")].kind is cp.NodeKind.MAP
    assert "more.items" in wf.graph.nodes
    result = run(wf, extra="[1, 2]")
    assert result.ok
    assert result["squares"] == [1, 4, 9] and result.output == 14
    assert result["more"] == [1, 4]
    assert run(wf)["more"] == [16, 25]


def test_map_items_feed_agents(tmp_path: Path) -> None:
    scripted = ScriptedModel(["A", "B"])
    wf = load_workflow(write(tmp_path, """
        name: per-item
        inputs:
          topics: list
        agents:
          a: {instructions: Be brief.}
        steps:
          each:
            agent: a
            map: ${inputs.topics}
            task: "Describe ${item.name}."
        """), models={"*": scripted})
    result = run(wf, topics=[{"name": "tea"}, {"name": "rain"}])
    assert result["each"] == ["A", "B"]
    tasks = sorted(r.messages[-1].content for r in scripted.requests)
    assert tasks == ["Describe rain.", "Describe tea."]


WHEN = """
    name: branching
    inputs:
      detailed: {type: boolean, default: false}
      limit: {type: integer, default: 2}
    steps:
      tags:
        python: helpers.py:echo
        args: {value: [a, b, c]}
      detail:
        python: helpers.py:echo
        args: {value: "details of ${steps.tags.output}"}
        when: ${inputs.detailed} and len(${steps.tags.output}) > ${inputs.limit}
      use_detail:
        python: helpers.py:echo
        args: {value: "${steps.detail.output}"}
      always:
        python: helpers.py:echo
        args: {value: done}
        needs: [detail]
      check_skipped:
        python: helpers.py:echo
        args: {value: checked}
        when: ${steps.detail.output} == null and 'b' in ${steps.tags.output}
    """


def test_when_false_skips_the_step_and_what_consumes_it(tmp_path: Path) -> None:
    wf = load_workflow(write(tmp_path, WHEN))
    result = run(wf)
    assert result.status is RunStatus.SUCCEEDED
    statuses = {k: v.status for k, v in result.nodes.items()}
    assert statuses["detail"] is NodeStatus.SKIPPED
    assert statuses["use_detail"] is NodeStatus.SKIPPED  # its input was skipped
    assert statuses["always"] is NodeStatus.SUCCEEDED  # needs: orders only
    assert result["check_skipped"] == "checked"  # a skipped step reads as null


def test_when_true_runs_the_step(tmp_path: Path) -> None:
    wf = load_workflow(write(tmp_path, WHEN))
    result = run(wf, detailed="yes")
    assert result["detail"] == 'details of ["a", "b", "c"]'
    assert result["use_detail"] == result["detail"]
    assert result.nodes["check_skipped"].status is NodeStatus.SKIPPED
    assert run(wf, detailed=True, limit=5).nodes["detail"].status is NodeStatus.SKIPPED


def test_loop_stops_when_until_holds_and_records_every_iteration(tmp_path: Path) -> None:
    wf = load_workflow(write(tmp_path, """
        name: looping
        steps:
          count:
            python: helpers.py:count_up
            args: {previous: "${loop.previous}", step: 2}
            loop: {max: 10, until: "${output} >= 5"}
          capped:
            python: helpers.py:count_up
            args: {previous: "${loop.previous}"}
            loop: {max: 3}
          self_ref:
            python: helpers.py:count_up
            args: {previous: "${loop.previous}"}
            loop:
              max: 9
              until: ${steps.self_ref.output} == ${loop.index} and ${loop.index} == 2
          after:
            python: helpers.py:echo
            args: {value: "${steps.count.output} after ${steps.count.iterations}"}
        output: count
        """))
    result = run(wf)
    assert result.ok
    assert result.nodes["count"].output == {"output": 6, "iterations": [2, 4, 6],
                                            "stopped": "until"}
    assert result.output == 6
    assert result["capped"] == {"output": 3, "iterations": [1, 2, 3], "stopped": "max"}
    assert result["self_ref"]["iterations"] == [1, 2]
    assert result["after"] == "6 after [2, 4, 6]"


def test_an_agent_loop_sees_its_previous_answer(tmp_path: Path) -> None:
    scripted = ScriptedModel(["draft", "better", "final"])
    wf = load_workflow(write(tmp_path, """
        name: refine
        agents:
          w: {instructions: Improve.}
        steps:
          draft:
            agent: w
            task: "Round ${loop.index}. Improve: ${loop.previous}"
            loop: {max: 5, until: "${output} == 'final'"}
        output: draft
        """), models={"*": scripted})
    result = run(wf)
    assert result.output == "final"
    assert result["draft"]["iterations"] == ["draft", "better", "final"]
    tasks = [r.messages[-1].content for r in scripted.requests]
    assert tasks == ["Round 1. Improve: ", "Round 2. Improve: draft",
                     "Round 3. Improve: better"]


def test_sub_workflow_is_a_sub_graph_node(tmp_path: Path) -> None:
    write(tmp_path, """
        name: shouter
        inputs:
          text: string
          suffix: {type: string, default: "!"}
        steps:
          loud:
            python: helpers.py:shout
            args: {text: "${inputs.text}", suffix: "${inputs.suffix}"}
        output: loud
        """, name="sub.yaml")
    wf = load_workflow(write(tmp_path, """
        name: parent
        steps:
          word:
            python: helpers.py:echo
            args: {value: hey}
          direct:
            workflow: sub.yaml
            inputs: {text: "${steps.word.output}"}
          templated:
            workflow: sub.yaml
            inputs: {text: "${steps.word.output} you", suffix: "?"}
          both:
            python: helpers.py:echo
            args: {value: "${steps.direct.output} ${steps.templated.output}"}
          never:
            workflow: sub.yaml
            inputs: {text: never}
            when: false
        output: both
        """))
    assert wf.graph.nodes[cp.NodeId("direct")].kind is cp.NodeKind.GRAPH
    assert "templated.inputs" in wf.graph.nodes
    result = run(wf)
    assert result.ok, result.nodes
    assert result.output == "HEY! HEY YOU?"
    assert result.nodes["never"].status is NodeStatus.SKIPPED


def test_retries_and_timeout_become_the_node_policy(tmp_path: Path) -> None:
    wf = load_workflow(write(tmp_path, f"""
        name: policy
        steps:
          flaky:
            python: helpers.py:flaky
            args: {{path: "{tmp_path / 'marker'}"}}
            retries: 2
            timeout: 5
          where:
            python: helpers.py:echo
            args: {{value: "${{workflow.name}} in ${{workflow.dir}}"}}
        """))
    policy = wf.graph.nodes[cp.NodeId("flaky")].policy
    assert (policy.retries, policy.timeout) == (2, 5)
    result = run(wf)
    assert result["flaky"] == "ok" and result.nodes["flaky"].attempts == 2
    assert result["where"] == f"policy in {tmp_path.resolve()}"


def test_bind_inputs_converts_text_and_fills_defaults(tmp_path: Path) -> None:
    wf = load_workflow(write(tmp_path, """
        name: typed-inputs
        inputs:
          s: string
          i: {type: integer, default: 1}
          f: {type: number, default: 0.5}
          b: {type: boolean, default: false}
          l: {type: list, default: []}
          o: {type: object, default: {}}
          maybe: {type: string, default: null}
        steps:
          x: {python: helpers.py:echo, args: {value: "${inputs.s}"}}
        """))
    assert wf.bind_inputs({"s": 7, "i": "42", "f": "2.5", "b": "yes", "l": '["a"]',
                           "o": '{"k": 1}'}) == {
        "s": "7", "i": 42, "f": 2.5, "b": True, "l": ["a"], "o": {"k": 1}, "maybe": None}
    assert wf.bind_inputs({"s": "t"})["i"] == 1


def test_same_file_compiles_to_the_same_graph(tmp_path: Path) -> None:
    path = write(tmp_path, WHEN)
    first, second = load_workflow(path), load_workflow(path)
    assert first.graph is not second.graph
    assert first.graph.fingerprint() == second.graph.fingerprint()
    assert list(first.graph.nodes) == list(second.graph.nodes)
    assert first.graph.nodes[cp.NodeId("detail")].where == f"{path}:9"


def test_a_workflow_run_resumes_without_redoing_finished_steps(tmp_path: Path) -> None:
    log = tmp_path / "marks.txt"
    path = write(tmp_path, f"""
        name: resumable
        steps:
          first:
            python: helpers.py:mark
            args: {{path: "{log}", text: one}}
          slow:
            python: helpers.py:slow_once
            args: {{path: "{tmp_path / 'slow.txt'}", value: "${{steps.first.output}}"}}
        output: slow
        """)
    store = cp.SQLiteStore(tmp_path / "runs.db")

    async def scenario() -> cp.RunResult:
        wf = load_workflow(path)
        handle = await cp.start(wf.graph, inputs=wf.bind_inputs({}), store=store, run_id="R")
        async for event in handle.events():
            if event.kind is cp.EventKind.NODE_STARTED and event.node == "slow":
                break
        waiter = asyncio.create_task(handle.result())
        await asyncio.sleep(0)  # the waiter now awaits the run
        waiter.cancel()  # the process going away mid-run: the run stops, resumable
        with pytest.raises(asyncio.CancelledError):
            await waiter
        await store.flush()
        load_workflow(path)  # a fresh load: resume finds the graph by the recorded source
        return await cp.resume("R", store=store)

    result = asyncio.run(asyncio.wait_for(scenario(), timeout=10))
    store.close()
    assert result.ok and result.output == "ONE"
    assert log.read_text() == "one\n"  # the finished step did not run again


def test_failures_at_run_time_name_the_step_and_its_line(tmp_path: Path) -> None:
    wf = load_workflow(write(tmp_path, """
        name: missing-key
        steps:
          info:
            python: helpers.py:info
          bad:
            python: helpers.py:echo
            args: {value: "${steps.info.output.titel}"}
        """))
    result = run(wf)
    error = result.nodes["bad"].error or {}
    assert result.nodes["bad"].status is NodeStatus.FAILED
    assert f"{tmp_path / 'wf.yaml'}:5: step 'bad'" in error["message"]
    assert "${steps.info.output.titel}" in error["message"]
    assert "has no key 'titel'; its keys are ['meta', 'tags', 'title']" in error["message"]


def test_load_errors_are_source_errors() -> None:
    assert issubclass(WorkflowError, cp.SourceError)
    with pytest.raises(WorkflowError, match=r"nope.yaml: cannot read the file"):
        load_workflow("nope.yaml")


def test_the_recorded_source_of_a_workflow_leads_back_to_its_graph(tmp_path: Path) -> None:
    from counterpoint.loader import find_graph, source_record
    from counterpoint.workflow.workflow import workflow_module

    path = write(tmp_path, WHEN)
    record = source_record(load_workflow(path).graph)
    assert record["file"] == str(path.resolve())
    module = workflow_module(path)  # what a loader hook for .yaml files would call
    assert module.__name__ == record["module"]
    graph = find_graph(module, None, name=record["graph"], where=str(path))
    assert graph.fingerprint() == record["fingerprint"]
