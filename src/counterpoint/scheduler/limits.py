"""Checks of what nodes need against what a run may ever grant."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..graph import NodeSpec


def over_limit(specs: Iterable[NodeSpec],
               limits: Mapping[str, int]) -> tuple[NodeSpec, str] | None:
    """The first node that needs more of a resource than the run may ever grant, and why."""
    for spec in specs:
        for name, units in spec.policy.resources.items():
            limit = limits.get(name)
            if limit is not None and units > limit:
                return spec, (f"node {spec.id!r} needs {units} of {name!r} but the run's "
                              f"limit is {limit}")
    return None
