"""Model routing per call: ``model="auto"`` chooses a model by policy (see :mod:`.auto`).

The registry of candidates and what the run log taught about them is :mod:`.registry`;
the policies are :mod:`.policies`; eligibility and the choice, :mod:`.router`; the
options, :mod:`.route`; what routing did in a run, per node (for ``show`` and the web
view), :mod:`.trail`.
"""

from __future__ import annotations

from .auto import offered_tags, retagged, route_call, router_for
from .policies import POLICIES, Choice, Option, RouteRequest
from .registry import Candidate, RouteStats, candidates, fold_run, stats_for
from .route import AUTO, BudgetLeft, Route
from .router import COMFORT_SHARE, Routed, Router

__all__ = ["AUTO", "COMFORT_SHARE", "POLICIES", "BudgetLeft", "Candidate", "Choice", "Option",
           "Route", "RouteRequest", "RouteStats", "Routed", "Router", "candidates",
           "fold_run", "offered_tags", "retagged", "route_call", "router_for", "stats_for"]
