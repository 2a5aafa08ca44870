"""The scheduler: the thin async loop around the pure core of :mod:`counterpoint.state`.

Read it in this order, each module one job:

* :mod:`.core`: the attributes of a run being executed, and the scheduler's constants;
* :mod:`.capacity`: concurrency slots and resources shared by a run and its sub-runs;
* :mod:`.pipeline`: events applied, numbered, logged and published; ready nodes started;
* :mod:`.attempts`: a node's attempts, with retries, timeouts, fallbacks and sub-runs;
* :mod:`.control`: live edits, cancels and stops;
* :mod:`.execution`: a run from start to end in its task group; preparing and resuming;
* :mod:`.handle`: what a caller holds of a run in progress;
* :mod:`.replay`: a run's state rebuilt from its log;
* :mod:`.fork`: a new run from a prefix of another run's log, reusing its outputs.

The scheduler never imports the layers above it (the API, workflows, agents, models,
the CLI): a running step reaches the run through :class:`counterpoint.context.RunAccess`.
"""

from .execution import Execution
from .handle import RunHandle

__all__ = ["Execution", "RunHandle"]
