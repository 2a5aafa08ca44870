"""One error hierarchy (counterpoint.errors): every public error is a CounterpointError."""

from __future__ import annotations

import importlib

import pytest

import counterpoint as cp

PUBLIC = ["counterpoint", "counterpoint.agents", "counterpoint.planning",
          "counterpoint.workflow", "counterpoint.models", "counterpoint.store"]


@pytest.mark.parametrize("module", PUBLIC)
def test_every_public_error_is_a_counterpoint_error(module: str) -> None:
    mod = importlib.import_module(module)
    for name in getattr(mod, "__all__", dir(mod)):
        value = getattr(mod, name)
        if isinstance(value, type) and issubclass(value, BaseException):
            assert issubclass(value, cp.CounterpointError), f"{module}.{name}"


def test_the_layers_errors_live_in_errors_py_and_stay_importable_where_they_were() -> None:
    from counterpoint.agents import AgentError
    from counterpoint.agents.tools import ToolError
    from counterpoint.planning import PlanningError

    assert (AgentError, ToolError, PlanningError) == (cp.AgentError, cp.ToolError,
                                                       cp.PlanningError)
    assert all(e.__module__ == "counterpoint.errors"
               for e in (AgentError, ToolError, PlanningError))
    assert issubclass(cp.FallbackFailed, cp.NodeFailed)


def test_a_secret_in_a_failing_steps_error_never_reaches_the_log() -> None:
    """Regression: an error echoing a configured secret was stored and shown verbatim."""
    from counterpoint.events import EventKind
    from counterpoint.secrets import register_secret

    secret = "sk-test-0123456789abcdef"
    register_secret(secret)

    async def leaky() -> None:
        raise RuntimeError(f"the server said: bad key {secret}")

    async def records(ctx: cp.NodeContext) -> None:
        ctx.record(EventKind.TOOL_RESULT, {"text": f"echo {secret}"})

    g = cp.Graph("leaky")
    g.add("leak", leaky)
    g.add("note", records)
    store = cp.MemoryStore()
    result = cp.run_sync(g, store=store)
    assert result.nodes["leak"].status is cp.NodeStatus.FAILED
    logged = repr([(e.data, e.value) for e in store.events(result.run_id)])
    assert secret not in logged
    assert "bad key ***" in logged and "echo ***" in logged


def test_every_error_class_is_exported_from_the_package() -> None:
    """A user catches any counterpoint error by its name on ``cp``, without knowing the
    module it lives in."""
    import counterpoint as cp
    import counterpoint.errors as errors
    classes = [name for name, value in vars(errors).items()
               if isinstance(value, type) and issubclass(value, Exception)
               and value.__module__ == errors.__name__ and not name.startswith("_")]
    assert classes and [name for name in classes if getattr(cp, name, None) is None] == []
