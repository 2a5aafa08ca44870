"""The models the router chooses from, and what the run log says about them.

A :class:`Candidate` is a configured model as the router sees it: prices, context
window, skill tags and quality rank (from ``counterpoint.toml`` or a
:class:`~counterpoint.models.ModelConfig` given in code). :class:`RouteStats` holds what
was measured per model and skill tag: tries, passes and mean latency, learned from the
run log by :func:`fold_run`:

- each ``model_routed`` event is a choice; the next ``model_routed`` event of the same
  node attempt that escalates from it (``escalated_from``) means it failed its output
  check or gave invalid output (a model *error* is not counted against its skill);
- a choice with no escalation after it passed when its node attempt succeeded, unless a
  later verifier round (``plan_round`` with ``phase = verify``) names its subtask in a
  gap: then it counts as a failure;
- ``model_call`` events of the chosen model in that attempt give its latency.

Estimates start from a prior (:data:`PRIOR` over :data:`PRIOR_WEIGHT` pseudo-tries), so
an unseen model is tried before it is judged, and a few failures do not rule it out.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from ..events import Event, EventKind
from ..models.config import ModelConfig, ModelRegistry

if TYPE_CHECKING:
    from ..store import RunStore

PRIOR = 0.7
"""The success an unseen model is assumed to have for a tag."""
PRIOR_WEIGHT = 4.0
"""How many tries the prior counts as."""
ANY_TAG = "*"
"""The tag every routed call is also counted under (the model's overall record)."""
LEARN_RUNS = 200
"""The newest finished runs of a store that the statistics are learned from."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Candidate:
    """A model the router may choose, from its configuration."""

    name: str
    quality: int
    """Rank: higher is stronger."""
    price_input: float | None
    """USD per million input tokens (``None``: unknown)."""
    price_output: float | None
    context_window: int | None
    tags: tuple[str, ...]
    """The skill tags it is offered for (empty: any)."""

    @classmethod
    def of(cls, config: ModelConfig) -> Candidate:
        assert config.quality is not None
        return cls(name=config.name, quality=config.quality, price_input=config.price_input,
                   price_output=config.price_output, context_window=config.context_window,
                   tags=config.tags)

    def worst_cost(self, prompt_tokens: int, max_tokens: int) -> float | None:
        """The most a call can cost: every prompt token uncached, ``max_tokens`` answered."""
        if self.price_input is None or self.price_output is None:
            return None
        return (prompt_tokens * self.price_input + max_tokens * self.price_output) / 1e6

    def offers(self, tags: Sequence[str]) -> bool:
        return not self.tags or all(t in self.tags for t in tags)


def candidates(registry: ModelRegistry, names: Sequence[str] = ()) -> list[Candidate]:
    """The models to route to: ``names``, else every configured model with a ``quality``.

    Raises :class:`ConfigError` when there are none, or a named one has no ``quality``.
    """
    if names:
        configs = [registry.resolve(n) for n in names]
        unranked = [c for c in configs if c.quality is None]
        if unranked:
            where = unranked[0].source or "code"
            raise ConfigError(f"model auto: {unranked[0].name} ({where}) has no quality rank; "
                              "set quality = N (higher is stronger) in its [models.NAME] "
                              "table to route to it")
    else:
        configs = [c for c in registry.models.values() if c.quality is not None]
    if not configs:
        files = ", ".join(str(f) for f in registry.files) or "no counterpoint.toml was found"
        raise ConfigError("model auto: there is no model to route to (" + files + "); give "
                          "some [models.NAME] tables a quality = N (higher is stronger) and "
                          "prices, or name them: Model.auto(models=[...])")
    return [Candidate.of(c) for c in configs]


@dataclass(slots=True)
class SkillStats:
    """What was measured of one model for one tag."""

    tries: int = 0
    passes: int = 0
    latency_total: float = 0.0
    latency_calls: int = 0

    @property
    def success(self) -> float:
        """The estimated chance of passing, with the prior."""
        return (self.passes + PRIOR * PRIOR_WEIGHT) / (self.tries + PRIOR_WEIGHT)

    @property
    def latency(self) -> float | None:
        """Mean seconds per call, ``None`` if never measured."""
        return self.latency_total / self.latency_calls if self.latency_calls else None


@dataclass
class RouteStats:
    """Per model and tag statistics; safe to use from several threads."""

    skills: dict[tuple[str, str], SkillStats] = field(default_factory=dict)
    folded: set[str] = field(default_factory=set)
    """Runs already learned from."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _get(self, model: str, tag: str) -> SkillStats:
        return self.skills.setdefault((model, tag), SkillStats())

    def observe(self, model: str, tags: Iterable[str], *, passed: bool | None = None,
                latency: float | None = None) -> None:
        """Count one outcome (``passed``) and/or one call's ``latency`` under each tag."""
        with self._lock:
            for tag in {ANY_TAG, *tags}:
                skill = self._get(model, tag)
                if passed is not None:
                    skill.tries += 1
                    skill.passes += int(passed)
                if latency is not None:
                    skill.latency_total += latency
                    skill.latency_calls += 1

    def success(self, model: str, tags: Sequence[str]) -> float:
        """The estimated success of ``model`` for ``tags``: the weakest tag's."""
        with self._lock:
            found = [self.skills.get((model, t)) for t in (tags or (ANY_TAG,))]
        return min(s.success if s is not None else PRIOR for s in found)

    def tries(self, model: str, tags: Sequence[str]) -> int:
        with self._lock:
            found = [self.skills.get((model, t)) for t in (tags or (ANY_TAG,))]
        return min(s.tries if s is not None else 0 for s in found)

    def latency(self, model: str) -> float | None:
        with self._lock:
            skill = self.skills.get((model, ANY_TAG))
        return skill.latency if skill is not None else None

    def learn(self, store: RunStore, *, runs: int = LEARN_RUNS) -> None:
        """Fold the newest ``runs`` finished runs of ``store`` not folded yet."""
        for record in store.runs(runs):
            if record.status == "running" or record.run_id in self.folded:
                continue
            fold_run(self, store.events(record.run_id))
            self.folded.add(record.run_id)


@dataclass(slots=True)
class _Choice:
    model: str
    tags: tuple[str, ...]
    node: str
    outcome: bool | None = None
    latency: list[float] = field(default_factory=list)


def fold_run(stats: RouteStats, events: Iterable[Event]) -> None:
    """Learn from one run's log (see the module docstring)."""
    pending: dict[tuple[str, int], list[_Choice]] = {}
    choices: list[_Choice] = []
    for event in events:
        data = event.data or {}
        key = (str(event.node), event.attempt)
        if event.kind is EventKind.MODEL_ROUTED:
            waiting = pending.setdefault(key, [])
            failed = data.get("escalated_from")
            if waiting and failed == waiting[-1].model:
                kind = (data.get("failure") or {}).get("kind")
                waiting.pop().outcome = None if kind == "error" else False
            model = data.get("model")
            if isinstance(model, str):
                choice = _Choice(model, tuple(data.get("tags") or ()), str(event.node))
                waiting.append(choice)
                choices.append(choice)
        elif event.kind is EventKind.MODEL_CALL:
            latest = pending.get(key)
            latency = data.get("latency")
            if latest and data.get("model") == latest[-1].model and \
                    isinstance(latency, int | float) and "error" not in data \
                    and not data.get("cache_hit"):
                latest[-1].latency.append(float(latency))
        elif event.kind is EventKind.NODE_SUCCEEDED:
            for choice in pending.pop(key, ()):
                choice.outcome = True
        elif event.kind is EventKind.NODE_FAILED:
            pending.pop(key, None)  # what failed the node is not known to be the model
        elif event.kind is EventKind.PLAN_ROUND and data.get("phase") == "verify":
            _gaps_fail(choices, data.get("gaps") or ())
    for choice in choices:
        for seconds in choice.latency:
            stats.observe(choice.model, choice.tags, latency=seconds)
        if choice.outcome is not None:
            stats.observe(choice.model, choice.tags, passed=choice.outcome)


def _gaps_fail(choices: list[_Choice], gaps: Iterable[Any]) -> None:
    """A verifier's gap naming a subtask fails the latest passed choice of its node
    (a subtask ``s`` runs as node ``s``, redone as ``s.r2``, ``s.r3``...)."""
    for gap in gaps:
        subtask = gap.get("subtask") if isinstance(gap, dict) else None
        if not subtask:
            continue
        for choice in reversed(choices):
            if choice.outcome and (choice.node == subtask or
                                   choice.node.startswith(f"{subtask}.r")):
                choice.outcome = False
                break


_STATS: weakref.WeakKeyDictionary[Any, RouteStats] = weakref.WeakKeyDictionary()
_STATS_LOCK = threading.Lock()


def stats_for(store: RunStore | None) -> RouteStats:
    """The statistics learned from ``store``'s log (one per store in a process), brought up
    to date with the runs that finished since; fresh ones without a store."""
    if store is None:
        return RouteStats()
    with _STATS_LOCK:
        try:
            stats = _STATS.setdefault(store, RouteStats())
        except TypeError:  # a store that cannot be weakly referenced: learn each time
            stats = RouteStats()
    stats.learn(store)
    return stats
