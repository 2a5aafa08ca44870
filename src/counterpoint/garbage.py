"""Garbage-collector settings for processes that run many workflows at once.

Every node of a run allocates short-lived objects (a task, its coroutine, events,
futures). CPython's default collector examines the youngest generation every 700
allocations, so with thousands of runs in flight those objects survive a few young
collections, are promoted to the oldest generation, and trigger full collections
that walk every live object: on 10,000 concurrent small workflows that was about
40% of the process's time, and those full collections found nothing to free
(reference counting frees the runtime's objects).

:func:`tune_gc` raises the young-generation threshold so that such objects die
before they are examined. It changes a process-wide setting, so counterpoint calls
it only where it owns the process: the ``counterpoint`` command line,
:func:`counterpoint.run_sync` and the shard actors of :mod:`counterpoint.ray.shards`
(with a higher young threshold there: ``SHARD_GC``).
Code that runs workflows inside its own event loop can call it once at start-up. Set
``COUNTERPOINT_GC=default`` to keep Python's settings everywhere.
"""

from __future__ import annotations

import gc
import os

THRESHOLDS = (20_000, 100, 20)
"""Young-generation allocations between collections, then how many collections of each
generation before the next one is examined (Python's defaults: 700, 10, 10).

The middle generation holds what outlived one young collection: with thousands of runs
in flight, mostly the runs' own objects, which live as long as their run and are freed
by reference counting. Examining it every 100 young collections instead of every 20
(every 2 million allocations instead of 400,000) spares walking them again and again:
on 10,000 concurrent small workflows that took 0.2-0.3 s of a 3 s trial (two
collections), and the median rate rose from 3,635 to 4,086 workflows/s (nine trials
each, 2026-11-30). The price: reference cycles that outlive a young collection wait
longer to be freed (most cyclic garbage, such as a caught exception and its frames, is
freed by the young collection that follows it)."""


def tune_gc(thresholds: tuple[int, int, int] = THRESHOLDS) -> tuple[int, int, int]:
    """Use ``thresholds`` unless ``COUNTERPOINT_GC=default``; returns the previous ones.

    Never lowers a threshold someone already raised, so it is safe to call repeatedly
    and after an application's own tuning.
    """
    previous: tuple[int, int, int] = gc.get_threshold()
    if os.environ.get("COUNTERPOINT_GC", "").strip().lower() == "default":
        return previous
    if previous[0] == 0:  # automatic collection is off: leave it off
        return previous
    gc.set_threshold(*(max(old, new) for old, new in zip(previous, thresholds, strict=True)))
    return previous
