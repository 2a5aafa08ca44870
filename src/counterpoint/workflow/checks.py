"""Checking what a workflow's steps say against the rest of the file.

The second layer of the workflow planner (:func:`.plan.plan_workflow`): keys given to the
wrong kind of step, ``needs`` and ``first_of`` naming steps that exist, every ``${...}``
reference in a place where it has a value, the arguments given to a tool, a function or a
sub-workflow against what it takes, and cycles among the steps. It records which steps
each step depends on, and a name that is not found comes with the closest one declared.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..agents import Tool
from ..graph import find_cycle
from ..ids import NodeId
from .resolver import SubWorkflow, _Resolver
from .spec import KINDS, StepSpec
from .templates import Ref
from .yamlsource import KeyPath


@dataclass(kw_only=True, slots=True)
class _Use:
    """A reference in a step, where it was written and in which role."""

    ref: Ref
    at: KeyPath
    role: str
    """``body``, ``map``, ``when`` or ``until``."""


@dataclass(kw_only=True, slots=True)
class _Checks(_Resolver):
    """The planner's checks; problems are reported, never raised."""

    deps: dict[str, set[str]] = field(default_factory=dict)
    """Step id -> the steps it reads or needs (for the cycle check)."""

    def _misplaced(self, step_id: str, spec: StepSpec, kind: str) -> None:
        at: KeyPath = ("steps", step_id)
        rules = (("task", ("agent",), spec.task is not None),
                 ("context", ("agent",), spec.context is not None),
                 ("model", ("agent",), spec.model is not None),
                 ("route", ("agent",), spec.route is not None),
                 ("samples", ("agent",), spec.samples is not None),
                 ("args", ("tool", "python"), bool(spec.args)),
                 ("inputs", ("workflow",), bool(spec.inputs)),
                 ("retries", KINDS[:4], spec.retries is not None),
                 ("timeout", KINDS[:4], spec.timeout is not None))
        for key, kinds, given in rules:
            if given and kind not in kinds:
                names = [f"{k}:" for k in kinds]
                where = names[0] if len(names) == 1 else \
                    f"{', '.join(names[:-1])} and {names[-1]}"
                self.report((*at, key), f"step {step_id!r}: {key}: applies to {where} "
                            f"steps, not {kind}:", _misplaced_hint(key, kind))
        if kind == "agent" and spec.task is None:
            self.report(at, f"step {step_id!r}: an agent step needs a task",
                        "add task: \"what the agent should do\"")

    def _first_of(self, step_id: str, names: list[str]) -> tuple[str, ...]:
        """The candidates of a ``first_of`` step (problems reported)."""
        at: KeyPath = ("steps", step_id, "first_of")
        if len(names) < 2:
            self.report(at, f"step {step_id!r}: first_of needs at least two steps, got "
                        f"{len(names)}", "list the steps whose outputs it joins: "
                        "first_of: [then_step, else_step]")
        seen: list[str] = []
        for index, name in enumerate(names):
            where: KeyPath = (*at, index)
            if name == step_id:
                self.report(where, f"step {step_id!r}: first_of names the step itself",
                            "list other steps")
            elif name in seen:
                self.report(where, f"step {step_id!r}: first_of names {name!r} twice",
                            "remove one")
            elif name not in self.spec.step_ids:
                hint = "write step ids, not templates: first_of: [a, b]" if "${" in name \
                    else _closest(name, self.spec.step_ids, "steps")
                self.report(where, f"step {step_id!r}: first_of names unknown step "
                            f"{name!r}", hint)
            else:
                self.deps[step_id].add(name)
                seen.append(name)
        return tuple(seen)

    def _need(self, step_id: str, need: str) -> None:
        at: KeyPath = ("steps", step_id, "needs")
        if need == step_id:
            self.report(at, f"step {step_id!r} needs itself", "remove it from needs")
        elif need not in self.spec.step_ids:
            self.report(at, f"step {step_id!r}: needs unknown step {need!r}",
                        _closest(need, self.spec.step_ids, "steps"))
        else:
            self.deps[step_id].add(need)

    def _check_ref(self, step_id: str, spec: StepSpec, use: _Use) -> None:
        ref, at, role = use.ref, use.at, use.role
        label = f"step {step_id!r}: ${{{ref.text}}}"
        if ref.root == "inputs" and ref.name not in self.spec.input_names:
            self.report(at, f"{label}: unknown input {ref.name!r}",
                        _closest(ref.name, self.spec.input_names, "inputs") +
                        ("" if self.spec.input_names else "; declare it under inputs:"))
        elif ref.root == "steps":
            if ref.name == step_id:
                self.report(at, f"{label}: a step cannot read its own output",
                            "in a loop step use ${loop.previous}; in loop.until use ${output}")
            elif ref.name not in self.spec.step_ids:
                self.report(at, f"{label}: unknown step {ref.name!r}",
                            _closest(ref.name, self.spec.step_ids, "steps"))
            else:
                self.deps[step_id].add(ref.name)
                other = self.spec.steps.get(ref.name)
                if ref.field == "iterations" and other is not None and other.loop is None:
                    self.report(at, f"{label}: step {ref.name!r} has no loop, so no "
                                "iterations", f"write ${{steps.{ref.name}.output}}")
        elif ref.root == "item" and (spec.map is None or role in ("when", "map")):
            self.report(at, f"{label}: ${{item}} exists only in the body of a map step",
                        "add map: ${steps.ID.output} to this step" if spec.map is None
                        else "when: is evaluated once, before the map; filter the list in "
                        "an earlier step instead")
        elif ref.root == "loop" and (spec.loop is None or role in ("when", "map")):
            self.report(at, f"{label}: ${{loop...}} exists only in a loop step's body and "
                        "until", "add loop: {max: N, until: ...} to this step")
        elif ref.root == "output" and role != "until":
            self.report(at, f"{label}: ${{output}} exists only in loop.until",
                        "write ${steps.ID.output}")

    def _check_tool_args(self, step_id: str, tool: Tool, args: Mapping[str, Any]) -> None:
        props = tool.parameters.get("properties", {})
        required = tool.parameters.get("required", [])
        self._check_names(step_id, f"tool {tool.name}", list(props), required, args)

    def _check_call_args(self, step_id: str, fn: Callable[..., Any],
                         args: Mapping[str, Any]) -> None:
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            return
        if any(p.kind is p.VAR_KEYWORD for p in params.values()):
            return
        names = [n for n, p in params.items()
                 if p.kind not in (p.VAR_POSITIONAL, p.POSITIONAL_ONLY)]
        required = [n for n in names if params[n].default is params[n].empty]
        self._check_names(step_id, getattr(fn, "__qualname__", "the function"), names,
                          required, args)

    def _check_names(self, step_id: str, what: str, names: list[str], required: Iterable[str],
                     args: Mapping[str, Any]) -> None:
        at: KeyPath = ("steps", step_id, "args")
        for name in args:
            if name not in names:
                self.report((*at, name), f"step {step_id!r}: {what} has no parameter "
                            f"{name!r}", _closest(name, names, "parameters"))
        missing = [n for n in required if n not in args]
        if missing:
            self.report(at if args else ("steps", step_id), f"step {step_id!r}: {what} "
                        f"needs {', '.join(map(repr, missing))}",
                        f"add args: {{{missing[0]}: ...}}")

    def _check_sub_inputs(self, step_id: str, sub: SubWorkflow,
                          given: Mapping[str, Any]) -> None:
        at: KeyPath = ("steps", step_id, "inputs")
        for name in given:
            if name not in sub.inputs:
                self.report((*at, name), f"step {step_id!r}: sub-workflow {sub.name!r} has no "
                            f"input {name!r}", _closest(name, list(sub.inputs), "inputs"))
        for name, spec in sub.inputs.items():
            if spec.required and name not in given:
                self.report(at if given else ("steps", step_id),
                            f"step {step_id!r}: sub-workflow {sub.name!r} needs input "
                            f"{name!r}", f"add inputs: {{{name}: ...}}")

    def _cycles(self) -> None:
        cycle = find_cycle({NodeId(k): [NodeId(d) for d in sorted(v)]
                            for k, v in self.deps.items()})
        if cycle:
            self.report(("steps", cycle[0]), f"steps form a cycle: {' -> '.join(cycle)}",
                        "remove one of these references or needs")


def _closest(word: str, known: Iterable[str], what: str) -> str:
    names = sorted(known)
    close = difflib.get_close_matches(word, names, n=1, cutoff=0.6)
    listed = f"{what}: {', '.join(names)}" if names else f"no {what} are declared"
    return f"did you mean {close[0]!r}? ({listed})" if close else listed


def _misplaced_hint(key: str, kind: str) -> str:
    if kind == "first_of":
        return "a first_of step only passes on the output of a step it names; put " \
               f"{key}: on those steps"
    return {"task": "tool and python steps take args:",
            "context": "pass values to tools and functions through args:",
            "model": "set the model on the agent (or on this agent step)",
            "args": "pass values to an agent through task: or context:, to a sub-workflow "
                    "through inputs:",
            "inputs": "pass values through args: (tool, python) or task:/context: (agent)",
            }.get(key, "remove it")
