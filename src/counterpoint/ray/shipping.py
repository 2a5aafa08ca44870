"""What crosses from the controller to Ray workers: pickled steps, Ray resources, big values.

* :func:`check_graph` pickles every step, fallback and literal input of a graph (and its
  sub-graphs) before the run starts, so a step that closes over a lock, a socket or other
  local state fails with :class:`~counterpoint.errors.StepNotSerializable` naming the node
  and the culprit, not with a pickling traceback in a worker.
* :func:`ray_options` maps a node's resource tags to Ray's: ``cpu`` to ``num_cpus``,
  ``gpu`` to ``num_gpus``, and any other name the cluster declares (``ray start
  --resources '{"embedder": 2}'``) to a custom resource. Names the cluster does not know
  stay counterpoint's own limits (``RunOptions.limits``) and are not sent to Ray.
* :func:`check_resources` refuses, before the run starts, a node whose Ray resources no
  node of the cluster has (Ray would queue its task forever, as infeasible).
* :func:`ship_by_value` makes the functions of a file loaded by path (``counterpoint run
  flow.py``: :func:`counterpoint.loader.load_file` imports it under a made-up module name
  that Ray workers cannot import) travel by value, as ``__main__``'s do.
* :func:`portable` and :func:`unwrap` carry a step's exception back from a worker when
  pickle cannot rebuild it (an exception class whose ``__init__`` takes other arguments
  than its ``args``, or that holds a lock): Ray would hand the controller an
  ``UnserializableException``, so the node's ``retry_on`` no longer matched its class.
  :func:`portable` wraps it in a :class:`StepRaised`, so the controller tells the step's
  own exceptions from Ray's failure to pickle the step's result after it returned.
* :func:`rough_size` estimates a value's size cheaply, without pickling it, to decide
  which inputs travel through Ray's object store.
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import StepNotSerializable, UserError
from ..graph import Graph, NodeSpec
from ..nodes import InputRef, NodeKind, NodeRef

CPU = "cpu"
GPU = "gpu"
FILE_MODULE_PREFIX = "cp_file_"
"""How :func:`counterpoint.loader.load_file` names the module of a file it imports."""
_BY_VALUE: set[str] = set()


def ship_by_value(fn: Any) -> None:
    """Have ``cloudpickle`` send the module of ``fn`` by value if it is a file loaded by
    path (workers could not import it by its made-up name). Idempotent."""
    name = getattr(fn, "__module__", None) or ""
    module = sys.modules.get(name)
    if name.startswith(FILE_MODULE_PREFIX) and module is not None and name not in _BY_VALUE:
        from ray import cloudpickle
        cloudpickle.register_pickle_by_value(module)  # type: ignore[no-untyped-call]
        _BY_VALUE.add(name)


def ray_options(resources: Mapping[str, int], cluster: Mapping[str, float]) -> dict[str, Any]:
    """Ray ``.options()`` for a node that holds ``resources``, on a cluster whose resources
    are ``cluster`` (``ray.cluster_resources()``); ``{}`` when none maps to Ray."""
    options: dict[str, Any] = {}
    custom: dict[str, float] = {}
    for name, units in resources.items():
        if name == CPU:
            options["num_cpus"] = units
        elif name == GPU:
            options["num_gpus"] = units
        elif name in cluster and name not in ("CPU", "GPU", "memory", "object_store_memory"):
            custom[name] = float(units)
    if custom:
        options["resources"] = custom
    return options


def rough_size(value: Any, budget: int = 64) -> int:
    """Bytes ``value`` takes, roughly: exact for ``bytes``/``str``, ``nbytes`` for arrays,
    summed over at most ``budget`` items of containers (scaled up to their length)."""
    if isinstance(value, bytes | bytearray | memoryview | str):
        return len(value)
    nbytes = getattr(value, "nbytes", None)
    if isinstance(nbytes, int):
        return nbytes
    if isinstance(value, dict):
        items: list[Any] = list(value.values())
    elif isinstance(value, list | tuple | set | frozenset):
        items = list(value)
    else:
        return 64
    if not items:
        return 64
    sample = items[:budget]
    seen = sum(rough_size(item, max(1, budget // len(sample))) for item in sample)
    return 64 + seen * len(items) // len(sample)


def _culprit(obj: Any, name: str) -> str:
    """What in ``obj`` cannot be pickled, as Ray's inspector finds it (it prints a report,
    which is kept out of the user's terminal)."""
    from ray.util import inspect_serializability
    with contextlib.redirect_stdout(io.StringIO()):
        _ok, failures = inspect_serializability(obj, name=name)
    named = sorted({f"{' -> '.join(f.path)!r} ({type(f.obj).__name__})" for f in failures})
    return f"it refers to {', '.join(named)}, which cannot be pickled" if named else ""


def check_picklable(obj: Any, what: str, spec: NodeSpec, graph: Graph) -> None:
    """Raise :class:`StepNotSerializable` if ``obj`` (``what`` of node ``spec``) cannot be
    pickled for a Ray worker."""
    from ray import cloudpickle
    ship_by_value(obj)
    try:
        cloudpickle.dumps(obj)  # type: ignore[no-untyped-call]
    except Exception as exc:
        culprit = _culprit(obj, getattr(obj, "__name__", what))
        raise StepNotSerializable(
            f"{spec.where or graph.source.origin}: graph {graph.name!r}, node {spec.id!r}: "
            f"{what} cannot be sent to a Ray worker{': ' + culprit if culprit else ''} "
            f"({type(exc).__name__}: {exc}). Create such objects inside the step, pass them "
            "in as inputs that pickle, or run without the Ray backend") from None


def check_graph(graph: Graph, checked: dict[Any, bool]) -> None:
    """Check that every node of ``graph`` (and of its sub-graphs) that the Ray backend would
    send to a worker can be pickled; ``checked`` remembers steps that passed (by identity)."""
    for spec in graph.nodes.values():
        fn = spec.fn
        if isinstance(fn, Graph):
            check_graph(fn, checked)
            continue
        if spec.kind is NodeKind.JOIN or spec.context_param or spec.policy.isolation != "thread":
            continue  # joins run no code; steps that take a NodeContext run in the controller
        callables: list[tuple[str, Callable[..., Any]]] = [
            (f"step {getattr(fn, '__qualname__', fn)!r}", fn)]
        if spec.policy.fallback is not None:
            callables.append(("its fallback", spec.policy.fallback))
        for what, item in callables:
            if item not in checked:
                check_picklable(item, what, spec, graph)
                checked[item] = True
        for name, value in spec.inputs.items():
            if not isinstance(value, NodeRef | InputRef) and rough_size(value) < 1 << 16:
                check_picklable(value, f"literal input {name!r}", spec, graph)


_RAY_NAMES = {"num_cpus": "CPU", "num_gpus": "GPU"}


def check_resources(graph: Graph, nodes: Callable[[], list[Mapping[str, float]]],
                    cluster: Mapping[str, float]) -> None:
    """Raise :class:`UserError`, naming the node, if a node of ``graph`` (or of its
    sub-graphs) asks for Ray resources that none of ``nodes()`` (each alive Ray node's
    ``Resources``; asked for only if a node has resource tags) holds: Ray would wait for
    such a node for ever."""
    for spec in graph.nodes.values():
        if isinstance(spec.fn, Graph):
            check_resources(spec.fn, nodes, cluster)
            continue
        if spec.kind is NodeKind.JOIN or spec.context_param or not spec.policy.resources:
            continue  # these run in the controller, which Ray does not schedule
        wanted = {_RAY_NAMES[k]: float(v) for k, v in ray_options(
            spec.policy.resources, cluster).items() if k in _RAY_NAMES}
        wanted.update(ray_options(spec.policy.resources, cluster).get("resources", {}))
        if not wanted or any(all(node.get(k, 0.0) >= v for k, v in wanted.items())
                             for node in nodes()):
            continue
        asks = ", ".join(f"{k} {v:g}" for k, v in sorted(wanted.items()))
        biggest = ", ".join(f"{k} {max((n.get(k, 0.0) for n in nodes()), default=0.0):g}"
                            for k in sorted(wanted))
        raise UserError(
            f"{spec.where or graph.source.origin}: graph {graph.name!r}, node {spec.id!r}: "
            f"its resources ask Ray for {asks} on one machine, and no node of the Ray cluster "
            f"has that (the most any node has: {biggest}), so it would wait for ever. Lower "
            "its resource tags, join a cluster that has such a node (ray start --resources), "
            "or pass RayBackend(autoscaling=True) if the cluster adds nodes on demand")


class CarriedError(Exception):
    """A step's exception that pickle cannot rebuild, as it crosses from a Ray worker: its
    class, ``args`` and attributes (those that pickle). Never seen outside this package:
    :func:`unwrap` turns it back into an instance of the class."""

    def __init__(self, cls: type[BaseException], args: tuple[Any, ...],
                 state: dict[str, Any], text: str) -> None:
        super().__init__(cls, args, state, text)
        self.cls, self.exc_args, self.state, self.text = cls, args, state, text


def _pickles(value: Any) -> bool:
    from ray import cloudpickle
    try:
        cloudpickle.loads(cloudpickle.dumps(value))  # type: ignore[no-untyped-call]
    except Exception:
        return False
    return True


class StepRaised(Exception):
    """What a worker raises when the step raised ``raised`` (the step's exception, or a
    :class:`CarriedError` of it). Any other exception a worker's task ends with was not
    the step's: Ray raised it pickling the step's result. Never seen outside this package."""

    def __init__(self, raised: Exception) -> None:
        super().__init__(raised)
        self.raised = raised


def portable(exc: Exception) -> StepRaised:
    """``exc`` (in a worker), marked as the step's, as a :class:`CarriedError` if it does
    not survive pickling."""
    if _pickles(exc):
        return StepRaised(exc)
    args = exc.args if _pickles(exc.args) else (str(exc),)
    state = {k: v for k, v in vars(exc).items() if _pickles(v)}
    return StepRaised(CarriedError(type(exc), args, state, str(exc)))


def unwrap(exc: BaseException) -> BaseException:
    """The step's own exception from a :class:`StepRaised` or a :class:`CarriedError` (in
    the controller): for a carrier, an instance of its class made without calling
    ``__init__``, with its ``args`` and attributes; ``exc`` itself if it is neither."""
    if isinstance(exc, StepRaised):
        exc = exc.raised
    if not isinstance(exc, CarriedError):
        return exc
    try:
        rebuilt = exc.cls.__new__(exc.cls)
        rebuilt.args = exc.exc_args
        rebuilt.__dict__.update(exc.state)
    except Exception:
        return RuntimeError(f"{exc.cls.__qualname__}: {exc.text}")
    return rebuilt
