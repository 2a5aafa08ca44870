"""The step-estimates role: how long each step took in earlier runs, for ranking.

:class:`RunningMeans` is the fold both built-in stores keep in memory.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence

ESTIMATE_DRIFT = 0.05
"""Relative change of a step's mean duration that makes stores publish new estimates.

Ranks are insensitive to small changes, and keeping the estimates object stable
lets every run of a graph reuse the ranks computed for the first one."""
ESTIMATE_FLOOR = 0.001
"""Seconds: a mean that moved less than this is not republished, however large the
relative change (a trivial step's 20 µs becoming 30 µs changes no rank that matters,
but rebuilt the ranks of a 1,000-node graph for every run)."""


class StepEstimates(abc.ABC):
    """Mean duration of each step key, folded from observed durations.

    Neither method blocks. :meth:`estimates` returns the same mapping object while no
    mean drifts (see :class:`RunningMeans`); callers must not modify it.
    """

    @abc.abstractmethod
    def estimates(self) -> Mapping[str, float]:
        """Mean duration in seconds of each step key seen in earlier runs."""

    @abc.abstractmethod
    def record_durations(self, samples: Mapping[str, Sequence[float]]) -> None:
        """Fold observed durations into the estimates. Never blocks."""


class RunningMeans:
    """Mean duration of each step key, folded from observed run times.

    Stores keep one; :meth:`published` returns the same mapping object until a
    mean drifts by more than :data:`ESTIMATE_DRIFT` and :data:`ESTIMATE_FLOOR`, so runs
    of a graph can reuse the ranks computed for the first one. Not thread-safe: callers
    that share it with another thread lock around :meth:`fold` and their reads of
    :attr:`stats`.
    """

    def __init__(self, stats: Mapping[str, tuple[int, float]] | None = None) -> None:
        self.stats: dict[str, tuple[int, float]] = dict(stats or {})
        """step key -> (sample count, running mean in seconds)."""
        self._published: dict[str, float] | None = None

    def published(self) -> Mapping[str, float]:
        """The current estimates (step key -> seconds)."""
        if self._published is None:
            self._published = {k: mean for k, (_, mean) in self.stats.items()}
        return self._published

    def fold(self, samples: Mapping[str, Sequence[float]]) -> None:
        """Add observed durations; republish if a mean is new or drifted."""
        published = self._published
        drifted = published is None
        for key, values in samples.items():
            if not values:
                continue
            count, mean = self.stats.get(key, (0, 0.0))
            count += len(values)  # the running mean over the old and the new samples, at once
            mean += (sum(values) - len(values) * mean) / count
            self.stats[key] = (count, mean)
            if not drifted:
                old = published.get(key)  # type: ignore[union-attr]
                drifted = old is None or \
                    abs(mean - old) > max(ESTIMATE_DRIFT * old, ESTIMATE_FLOOR)
        if drifted:
            self._published = None
