"""A workflow file's ``route:`` (workflow and step level) applied to ``model: auto``.

``route:`` at the top level sets how every routed agent step chooses its model; a
step's ``route:`` overrides it key by key (``policy``, ``tags``, ``models``). A step whose
agent's model is ``auto`` (by name, or an override that is ``Model.auto(...)``) gets a copy
of that model with the merged route; the override's own output check, threshold and
budget are kept. The names in ``models:`` are checked against the configuration.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable

from ..errors import ConfigError
from ..models import Model, ModelRegistry
from ..routing.route import Route
from .spec import RouteSpec
from .yamlsource import KeyPath

Report = Callable[[KeyPath, str, str], None]


def merged(top: RouteSpec | None, step: RouteSpec | None) -> RouteSpec | None:
    """The step's route: its keys, else the workflow's."""
    if top is None or step is None:
        return step or top
    return RouteSpec.model_validate({**top.model_dump(exclude_unset=True),
                                     **step.model_dump(exclude_unset=True)})


def routed(model: Model, spec: RouteSpec) -> Model:
    """``model`` (routed) with ``spec`` applied to its route."""
    base = model.route or Route()
    route = dataclasses.replace(
        base, policy=spec.policy if spec.policy is not None else base.policy,
        tags=tuple(spec.tags) if spec.tags is not None else base.tags,
        models=tuple(spec.models) if spec.models is not None else base.models)
    clone = copy.copy(model)  # a Model holds no per-call state; the copy shares its limits
    clone.route = route
    return clone


def check_models(spec: RouteSpec, at: KeyPath, registry: ModelRegistry | None,
                 report: Report) -> None:
    """Report each name of ``models:`` that ``registry`` does not define or rank."""
    if registry is None:
        return
    for index, name in enumerate(spec.models or ()):
        try:
            config = registry.resolve(name)
        except ConfigError as exc:
            report((*at, "models", index), f"route: {exc}",
                   "name a model of counterpoint.toml's [models.NAME] tables")
            continue
        if config.quality is None:
            where = f" ({config.source})" if config.source else ""
            report((*at, "models", index), f"route: model {name!r}{where} has no quality "
                   "rank, so it cannot be routed to",
                   f"set quality = N (higher is stronger) in [models.{name}]")
