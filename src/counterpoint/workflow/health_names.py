"""Checking the names a workflow's ``health:`` overrides (``models: NAME``, ``tools:
NAME``): a name that matches no model or tool would leave its breaker settings silently
unapplied, so it is reported with its line.

The check is made when the workflow loads, once its agents are resolved: the models it
can call are the names written in the file (``model:`` of the workflow, its agents and
steps, ``route: models:``), the overrides given to ``load_workflow(models=...)``, the
configured models of ``counterpoint.toml`` and any ``provider:model`` name; its tools
are those of its agents and their alternatives. A workflow with MCP servers is not
checked for tool names: a server's tools are only known once it starts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ..agents import Tool
from ..models import ModelRegistry
from ..models.config import is_builtin
from .spec import WorkflowSpec
from .yamlsource import KeyPath

Report = Callable[[KeyPath, str, str], None]


def check_health_names(spec: WorkflowSpec, *, overrides: Iterable[str],
                       registry: ModelRegistry | None, tools: Iterable[object],
                       report: Report) -> None:
    """Report each ``health:`` model or tool override that names nothing the workflow
    can call (see the module docstring)."""
    if spec.health.models:
        written = {name for name in (spec.model, *(a.model for a in spec.agents.values()),
                                     *(s.model for s in spec.steps.values())) if name}
        for route in (spec.route, *(s.route for s in spec.steps.values())):
            written.update((route.models or []) if route is not None else [])
        written.update(name for name in overrides if name != "*")
        configured = set(registry.models) if registry is not None else set()
        known = sorted((written | configured) - {"auto"})
        for name in spec.health.models:
            if name not in written and name not in configured and not is_builtin(name):
                report(("health", "models", name),
                       f"health: models: {name!r} is not a model this workflow can call; "
                       f"the known models are {', '.join(known) or '(none)'} and any "
                       "provider:model name",
                       "fix the name: its breaker settings would not apply to any model")
    if spec.health.tools and not spec.mcp:
        names = sorted(_names(t for t in tools if isinstance(t, Tool)))
        for name in spec.health.tools:
            if name not in names:
                report(("health", "tools", name),
                       f"health: tools: {name!r} is not a tool of this workflow's agents; "
                       f"the tools are {', '.join(names) or '(none)'}",
                       "fix the name: its breaker settings would not apply to any tool")


def _names(tools: Iterable[Tool]) -> set[str]:
    """The tools' names and their alternatives' (each has a breaker of its own)."""
    found: set[str] = set()
    queue = list(tools)
    while queue:
        tool = queue.pop()
        if tool.name not in found:
            found.add(tool.name)
            queue.extend(tool.alternatives)
    return found
