"""Health and self-healing without an LLM: circuit breakers per model and per tool, and
deterministic rerouting over a cost-weighted graph of alternatives.

- :mod:`.breaker`: one target's breaker (closed, open, half-open) on an injected clock;
- :mod:`.registry`: the breakers of a process, shared by its runs; state changes are
  ``health_changed`` events;
- :mod:`.routes`: the graph of alternatives and its cheapest healthy path (Dijkstra);
- :mod:`.chain`: a model call's fallback chain, rerouted (used by ``Model.generate``);
- :mod:`.tools`: a tool call rerouted to its declared alternatives or a cached answer;
- :mod:`.escalation`: what happens when no healthy path is left;
- :mod:`.settings`: breaker settings from ``counterpoint.toml`` (``[health]``) and
  workflow files (``health:``).
"""

from .breaker import Breaker, BreakerOptions, BreakerState, Transition
from .escalation import Escalation, ModelReplanner, Replanner
from .registry import HealthRegistry, health, model_target, tool_target, use_health
from .routes import Edge, Route, RouteGraph
from .settings import HealthSettings, parse_health

__all__ = ["Breaker", "BreakerOptions", "BreakerState", "Edge", "Escalation", "HealthRegistry",
           "HealthSettings", "ModelReplanner", "Replanner", "Route", "RouteGraph",
           "Transition", "health", "model_target", "parse_health", "tool_target",
           "use_health"]
