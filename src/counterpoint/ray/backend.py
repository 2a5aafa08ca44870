"""The Ray execution backend: node callables run in Ray workers; the controller keeps the
scheduler and the log.

* Async steps run in a pool of async actors (``actors`` of them, each running many steps
  at once on its own loop): a call costs about a millisecond, where a Ray task costs a
  worker hand-over. Sync steps run as Ray tasks, which Ray spreads over the cluster's
  CPUs (so CPU-bound Python escapes the controller's GIL).
* A node's resource tags map to Ray resources (:func:`.shipping.ray_options`); an async
  step that holds Ray resources runs in a pool of actors created with them.
* A step is put in Ray's object store once; an input larger than ``inline_bytes`` is put
  there too (once per object, so a fan-out of one big output sends it once) and fetched
  by the worker; large results come back through the object store as Ray returns them.
* A result Ray cannot pickle to send back (a lock, a file open for writing, a
  generator) fails the node with :class:`~counterpoint.errors.OutputNotSerializable`
  naming the node, never retried (the in-process backend fails such an output the same
  way when it stores it as JSON).
* Cancellation and timeouts (the scheduler cancels the awaiting task) reach the worker
  through ``ray.cancel``. A worker or actor that dies mid-attempt raises
  :class:`~counterpoint.errors.WorkerLost`, an attempt failure the node's retry policy
  retries; a dead actor is replaced, so the next attempt runs on a fresh one.
* A step that takes a :class:`~counterpoint.context.NodeContext` talks to its run (live
  edits, approvals, the model layer's accounting), which lives in the controller: it runs
  in the controller, as the in-process backend runs it.

Safe to call concurrently from one event loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from ..backend import InProcessBackend
from ..context import _CURRENT, NodeContext
from ..errors import NodeFailed, OutputNotSerializable, WorkerLost
from ..graph import Graph
from .cluster import connect
from .shipping import (
    StepRaised,
    check_graph,
    check_resources,
    ray_options,
    rough_size,
    ship_by_value,
    unwrap,
)

INLINE_BYTES = 1 << 20
"""Inputs estimated above this many bytes travel through Ray's object store."""
_KEPT_VALUES = 256
"""Big inputs whose object-store reference is remembered (most recent first)."""


class _ActorPool:
    """Async step actors created with one set of Ray options, used round-robin."""

    def __init__(self, factory: Callable[[], Any], size: int) -> None:
        self._factory = factory
        self.actors = [factory() for _ in range(size)]
        self._next = 0

    def pick(self) -> Any:
        self._next = (self._next + 1) % len(self.actors)
        return self.actors[self._next]

    def replace(self, dead: Any) -> None:
        """Swap ``dead`` for a fresh actor (once, however many calls saw it die)."""
        for i, actor in enumerate(self.actors):
            if actor is dead:
                self.actors[i] = self._factory()


class RayBackend:
    """Runs node callables on Ray (see the module docstring).

    ``address``: ``None`` starts a local Ray cluster (of ``num_cpus`` CPUs, default all),
    ``"auto"`` joins the cluster ``ray start`` runs on this machine, ``"ray://host:10001"``
    a remote one. ``actors``: async step actors per pool. Ray is started at the first run
    (or :meth:`start`), not when the backend is made. ``autoscaling``: the cluster adds
    nodes on demand, so a node asking for resources no node has yet is sent anyway (by
    default such a run fails as it starts, naming the node).
    """

    def __init__(self, address: str | None = None, *, num_cpus: int | None = None,
                 actors: int = 2, actor_concurrency: int = 1000,
                 inline_bytes: int = INLINE_BYTES, autoscaling: bool = False) -> None:
        if actors < 1:
            raise ValueError(f"RayBackend needs at least one actor, got {actors}")
        self.address = address
        self.num_cpus = num_cpus
        self.actors = actors
        self.actor_concurrency = actor_concurrency
        self.inline_bytes = inline_bytes
        self.autoscaling = autoscaling
        self._ray: Any = None
        self._lock = threading.Lock()
        self._local = InProcessBackend()
        self._cluster: dict[str, float] = {}
        self._pools: dict[tuple[Any, ...], _ActorPool] = {}
        self._steps: dict[Callable[..., Any], Any] = {}
        self._values: OrderedDict[int, tuple[Any, Any]] = OrderedDict()
        self._checked: dict[Any, bool] = {}

    def start(self) -> Any:
        """Connect to (or start) the Ray cluster; returns the ``ray`` module. Idempotent."""
        if self._ray is None:
            with self._lock:
                if self._ray is None:
                    ray = connect(self.address, num_cpus=self.num_cpus)
                    self._cluster = dict(ray.cluster_resources())
                    self._ray = ray
        return self._ray

    def check_graph(self, graph: Graph) -> None:
        """Raise :class:`~counterpoint.errors.StepNotSerializable`, naming the node, if a
        step of ``graph`` cannot be sent to a Ray worker, or a ``UserError`` if a node asks
        for Ray resources no node of the cluster has. Called as a run starts."""
        ray = self.start()
        check_graph(graph, self._checked)
        if not self.autoscaling:
            check_resources(graph, lambda: [n.get("Resources", {}) for n in ray.nodes()
                                            if n.get("Alive")], self._cluster)

    async def call(self, fn: Callable[..., Any], kwargs: dict[str, Any], *,
                   is_async: bool) -> Any:
        if any(type(v) is NodeContext for v in kwargs.values()):
            return await self._local.call(fn, kwargs, is_async=is_async)
        ray = self.start()
        from .workers import RemoteStepActor, call_sync
        where, resources = _node()
        options = ray_options(resources, self._cluster)
        actor = None
        try:
            step = self._step(fn)
            small, refs = self._split(kwargs)
            if is_async:
                actor = self._pool(options, RemoteStepActor).pick()
                ref = actor.call.remote(step, small, refs)
            else:
                remote = call_sync.options(**options) if options else call_sync
                ref = remote.remote(step, small, refs)
        except Exception as exc:  # a live edit's step, or an input, that does not pickle
            raise NodeFailed(f"{where}: cannot send the step or its inputs to a Ray worker "
                             f"({type(exc).__name__}: {exc})", retryable=False) from None
        try:
            return await ref
        except asyncio.CancelledError:
            ray.cancel(ref)
            raise
        except ray.exceptions.RayTaskError as exc:
            if isinstance(exc.cause, StepRaised):
                raise unwrap(exc.cause) from None
            if isinstance(exc.cause, Exception) and \
                    not isinstance(exc.cause, ray.exceptions.RayError):
                raise _unsendable(where, exc.cause) from None
            raise
        except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError,
                ray.exceptions.NodeDiedError, ray.exceptions.ObjectLostError,
                ray.exceptions.OutOfMemoryError, ray.exceptions.LocalRayletDiedError) as exc:
            if actor is not None:
                self._pool(options, RemoteStepActor).replace(actor)
            raise WorkerLost(f"{where}: the Ray worker running it died "
                             f"({type(exc).__name__}); the next attempt, if the node's "
                             "retries allow one, runs on a fresh worker") from None

    def _pool(self, options: Mapping[str, Any], actor_class: Any) -> _ActorPool:
        key = tuple(sorted((k, repr(v)) for k, v in options.items()))
        pool = self._pools.get(key)
        if pool is None:
            made = actor_class.options(max_concurrency=self.actor_concurrency, **options)
            pool = self._pools[key] = _ActorPool(made.remote, self.actors)
        return pool

    def _step(self, fn: Callable[..., Any]) -> Any:
        ref = self._steps.get(fn)
        if ref is None:
            ship_by_value(fn)  # a live edit's step may come from a file loaded by path
            ref = self._steps[fn] = self._ray.put(fn)
        return ref

    def _split(self, kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """The inputs sent inline, and the big ones as object-store references."""
        refs: dict[str, Any] = {}
        for name, value in kwargs.items():
            if rough_size(value) > self.inline_bytes:
                refs[name] = self._put(value)
        if not refs:
            return kwargs, refs
        return {k: v for k, v in kwargs.items() if k not in refs}, refs

    def _put(self, value: Any) -> Any:
        kept = self._values.get(id(value))
        if kept is not None and kept[0] is value:
            self._values.move_to_end(id(value))
            return kept[1]
        ref = self._ray.put(value)
        self._values[id(value)] = (value, ref)  # the value is kept, so its id is not reused
        while len(self._values) > _KEPT_VALUES:
            self._values.popitem(last=False)
        return ref

    def close(self) -> None:
        """End the actors this backend started (the Ray cluster itself stays up)."""
        ray = self._ray
        for pool in self._pools.values():
            for actor in pool.actors:
                ray.kill(actor)
        self._pools.clear()
        self._steps.clear()
        self._values.clear()
        self._local.close()


def _node() -> tuple[str, Mapping[str, int]]:
    """Where the current attempt is (for messages) and the resources its node holds."""
    current = _CURRENT.get()
    if current is None:
        return "a step outside a run", {}
    execution, node, attempt = current
    spec = execution.state.nodes[node].spec
    resources = spec.policy.resources if spec is not None else {}
    return f"run {execution.run_id}, node {node!r}, attempt {attempt}", resources


def _unsendable(where: str, exc: Exception) -> OutputNotSerializable:
    """The node's failure when Ray could not pickle the step's result (``exc``, raised by
    Ray after the step returned): not retryable, the same output would fail again."""
    return OutputNotSerializable(
        f"{where}: the node's output cannot be sent back from the Ray worker "
        f"({type(exc).__name__}: {exc}). Return JSON-compatible data (a dict, a list, a "
        "dataclass or a pydantic model): a node's output is stored as JSON, so run "
        "in-process it would fail as well; keep a lock, a client or a file inside the "
        "step that uses it")
