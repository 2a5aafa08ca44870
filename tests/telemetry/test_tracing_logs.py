"""Runs as Python logging records under the ``counterpoint.*`` loggers (caplog)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import pytest

import counterpoint as cp
from counterpoint.errors import ModelUnavailable
from counterpoint.models import Model, ScriptedModel
from counterpoint.telemetry import LogRecords, log_records

FAST = cp.Backoff(initial=0.01, factor=1.0, maximum=0.01, jitter=0.0)


def _records(caplog: pytest.LogCaptureFixture, logger: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == logger]


async def test_run_and_node_lifecycle_retries_and_model_errors_are_records(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="counterpoint")
    scripted = ScriptedModel([ModelUnavailable("model flaky: overloaded", model="flaky"),
                              "fine"], name="flaky")
    model = Model(scripted, retries=1, backoff=FAST, cache=False)
    calls = []

    async def wobbly() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionError("dropped")
        return "ok"

    async def ask() -> str:
        return (await model.generate("Hello?")).text

    async def broken() -> None:
        raise ValueError("beyond repair")

    g = cp.Graph("logged")
    g.add("wobbly", wobbly, policy=cp.Policy(retries=1, backoff=FAST))
    g.add("ask", ask)
    g.add("broken", broken)
    result = await cp.run(g, store="memory")
    assert result.status == "failed"
    run_id = result.run_id

    runs = _records(caplog, "counterpoint.run")
    assert [(r.levelno, r.getMessage()) for r in runs] == [
        (logging.INFO, f"run {run_id} of graph logged started (3 nodes)"),
        (logging.ERROR, f"run {run_id} failed")]
    nodes = _records(caplog, "counterpoint.node")
    retried = [r for r in nodes if r.levelno == logging.WARNING]
    assert [r.getMessage() for r in retried] == [
        f"run {run_id}, node 'wobbly': attempt 1 failed (ConnectionError: dropped); "
        "retrying in 0.01s"]
    assert retried[0].counterpoint_node == "wobbly"  # type: ignore[attr-defined]
    assert retried[0].counterpoint_attempt == 1  # type: ignore[attr-defined]
    assert retried[0].counterpoint_run_id == run_id  # type: ignore[attr-defined]
    assert retried[0].counterpoint_event == "node_failed"  # type: ignore[attr-defined]
    failed = [r.getMessage() for r in nodes if r.levelno == logging.ERROR]
    assert failed == [f"run {run_id}, node 'broken' failed: ValueError: beyond repair"]
    succeeded = sorted(r.getMessage() for r in nodes if r.levelno == logging.DEBUG
                       and r.getMessage().endswith("succeeded"))
    assert succeeded == [f"run {run_id}, node 'ask': attempt 1 succeeded",
                         f"run {run_id}, node 'wobbly': attempt 2 succeeded"]
    models = _records(caplog, "counterpoint.model")
    warned = [r.getMessage() for r in models if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "model flaky call 1 failed (ModelUnavailable" in warned[0]
    assert warned[0].endswith("; retrying in 0.01s")
    assert [r.levelno for r in models if "answered" in r.getMessage()] == [logging.DEBUG]


async def test_levels_decide_what_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="counterpoint")

    async def one() -> int:
        return 1

    g = cp.Graph("quiet")
    g.add("one", one)
    result = await cp.run(g, store="memory")
    assert result.ok
    assert not [r for r in caplog.records if r.name.startswith("counterpoint.")]


@pytest.fixture
def counterpoint_logger() -> Iterator[logging.Logger]:
    """The ``counterpoint`` logger, its handlers, level and propagation restored after."""
    logger = logging.getLogger("counterpoint")
    saved = logger.propagate, list(logger.handlers), logger.level
    yield logger
    logger.propagate, logger.handlers = saved[0], saved[1]
    logger.setLevel(saved[2])


class _Run:
    run_id = cp.RunId("r-test")
    parent = None
    store = cp.MemoryStore()
    state = None


def test_a_run_is_observed_only_when_a_record_could_be_seen(
        counterpoint_logger: logging.Logger) -> None:
    unconfigured = counterpoint_logger
    unconfigured.propagate = False  # cut off from the root's (and pytest's) handlers
    unconfigured.handlers = [logging.NullHandler()]
    assert log_records(_Run()) is None  # type: ignore[arg-type]
    handler = logging.StreamHandler()
    unconfigured.addHandler(handler)
    assert isinstance(log_records(_Run()), LogRecords)  # type: ignore[arg-type]
    unconfigured.setLevel(logging.CRITICAL)
    assert log_records(_Run()) is None  # type: ignore[arg-type]


async def test_a_secret_in_an_edit_reason_or_a_cancel_reason_is_masked_in_the_records(
        caplog: pytest.LogCaptureFixture) -> None:
    """What the spans mask, the records mask: the log keeps an edit's reason as the step
    wrote it, secrets of the environment too."""
    from counterpoint.secrets import register_secret
    secret = "tok-records-0123456789abcdef"
    register_secret(secret)
    caplog.set_level(logging.DEBUG, logger="counterpoint")

    async def edits(ctx: cp.NodeContext) -> str:
        edit = cp.Edit(reason=f"signed in with {secret}")
        edit.add("later", lambda: 1)
        edit.cancel("slow")
        ctx.apply(edit)
        return "edited"

    async def slow() -> None:
        await asyncio.sleep(60)

    g = cp.Graph("masked")
    g.add("slow", slow)
    g.add("edits", edits)
    assert (await cp.run(g, store="memory")).status == "succeeded"
    said = [r.getMessage() for r in caplog.records if r.name.startswith("counterpoint.")]
    assert any("signed in with ***" in m for m in said), said
    assert not [m for m in said if secret in m]
