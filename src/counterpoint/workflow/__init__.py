"""Declarative YAML workflows that compile to the same :class:`~counterpoint.Graph` as the
Python API.

>>> wf = load_workflow("examples/workflows/digest.yaml")            # doctest: +SKIP
>>> result = await cp.run(wf.graph, inputs=wf.bind_inputs({}))       # doctest: +SKIP

A file (see ``examples/workflows/digest.yaml``)::

    name: NAME                        # required; the graph's name
    description: TEXT
    model: MODEL                      # default model of agents that name none
    inputs:
      NAME: {type: string|integer|number|boolean|list|object, default: V, description: T}
      OTHER: string                   # shorthand; no default = required
    agents:
      NAME:
        model: MODEL
        instructions: TEXT
        tools: [module:function, file.py:function]   # files relative to this file
        output: {field: string, items: "list[string]", note: "string?"}  # or module:Class
        max_turns: N                  # also max_tokens, turn_tokens, temperature, deadline
        samples: N                    # parallel samples of each turn, majority kept
    steps:
      ID:                             # one of agent / tool / python / workflow / first_of:
        agent: NAME                   # with task: TEMPLATE, context: TEMPLATE | [step ids]
        tool: REF                     # with args: {name: value or TEMPLATE}
        python: REF                   # with args: {...}
        workflow: sub.yaml            # with inputs: {...}; runs as a sub-graph node
        first_of: [ID, ID, ...]       # the output of the first listed step that ran
        needs: [ID, ...]              # ordering only (references already add data edges)
        map: ${steps.ID.output}       # one node per item; ${item} in templates
        when: CONDITION               # false -> the step (and what reads it) is skipped
        loop: {max: N, until: CONDITION}   # ${loop.index}, ${loop.previous}, ${output}
        model: MODEL                  # agent steps: another model
        samples: N                    # agent steps: another number of samples
        retries: N                    # per iteration in a loop
        timeout: SECONDS              # per iteration in a loop
    output: ID                        # or ${steps.ID.output.path}

Templates (:mod:`.templates`): ``${inputs.NAME}``, ``${steps.ID.output.a.0}``,
``${steps.ID.iterations}``, ``${item}``, ``${loop.index}``, ``${loop.previous}``,
``${workflow.dir}``; a template that is exactly one reference keeps the value's
type. Conditions (:mod:`.conditions`): comparisons, ``in``, ``and/or/not``,
literals, ``len(x)`` and references; a skipped step reads as ``null``. A loop
step's output is ``{"output", "iterations", "stopped"}``; ``${steps.ID.output}``
reads its last iteration. Each iteration runs as a node of its own (``ID.1``,
``ID.2``, ...), so a resumed run does not repeat finished iterations. A
``first_of`` step joins the branches of ``when`` conditions (if / else): its
output is that of the first step it lists that succeeded; it is skipped when all
of them were.

Everything is checked before anything runs; every problem found is reported at
once, each with ``file:line`` and a hint (:class:`WorkflowError`). Models can be
replaced without editing the file: ``load_workflow(path, models={"NAME": model,
"*": model})``.

Modules: :mod:`.yamlsource` (YAML with line marks), :mod:`.spec` (the file's
shape), :mod:`.templates`, :mod:`.conditions`, :mod:`.schemas` (agent output
specs), :mod:`.imports` (Python references), :mod:`.plan` (the spec read into a
plan), :mod:`.resolver` (what the file names), :mod:`.checks` (what steps refer
to), :mod:`.compile` (plan -> graph), :mod:`.steps` (what the nodes run),
:mod:`.inputs` (binding input values), :mod:`.workflow` (loading).
Importing the package registers ``.yaml``/``.yml`` files and recorded workflow sources
with :mod:`counterpoint.loader`.
"""

from __future__ import annotations

from ..loader import register_loader, register_source_kind
from .errors import Problem, WorkflowError
from .spec import InputSpec
from .workflow import WORKFLOW_KIND, Workflow, load_workflow, rebuild_recorded, workflow_module

# what makes ``counterpoint run/resume FILE.yaml`` and the resume of a recorded workflow run
# work: counterpoint.loader imports this package when it meets either (loader.PROVIDERS)
register_loader((".yaml", ".yml"), workflow_module)
register_source_kind(WORKFLOW_KIND, rebuild_recorded)

__all__ = ["InputSpec", "Problem", "Workflow", "WorkflowError", "load_workflow"]
