"""The output block of a run's summary (counterpoint.cli.render.summary): bounded in
lines and in characters, whatever the graph returned."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
from rich.console import Console

import counterpoint as cp
from counterpoint.cli.recorded import log_report
from counterpoint.cli.render import OUTPUT_CHARS, summary


def _shown(graph: cp.Graph) -> str:
    """The summary ``counterpoint run`` prints for a run of ``graph``."""
    store = cp.MemoryStore()
    try:
        result = cp.run_sync(graph, store=store)
        run_id = result.run_id
        report = replace(log_report(store.run(run_id), store.events(run_id),
                                    store.forks(run_id)), output=result.output)
    finally:
        store.close()
    console = Console(width=120, record=True, markup=False)
    console.print(summary(report, inspect=None))
    return console.export_text()


def test_a_huge_output_value_is_clipped_in_characters_too() -> None:
    """One 3 MB string is one JSON line: clipping by lines alone printed all of it."""
    g = cp.Graph("huge")
    g.add("huge", lambda: "x" * 3_000_000)
    text = _shown(g)
    assert len(text) < 3 * OUTPUT_CHARS
    assert "more characters; see --json" in text


def test_a_small_output_is_shown_whole() -> None:
    g = cp.Graph("small")
    g.add("small", lambda: "y" * 50)
    text = _shown(g)
    assert '"small": "' + "y" * 50 + '"' in text and "see --json" not in text


def test_a_secret_of_the_environment_in_the_output_is_masked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from counterpoint import secrets

    key = "sk-test-summary-0123456789SECRET"
    monkeypatch.setenv("QA_SUMMARY_API_KEY", key)
    secrets.register_environment()
    g = cp.Graph("leak")
    g.add("leak", lambda: f"the key is {key}")
    text = _shown(g)
    assert key not in text and '"leak": "the key is ***"' in text


def test_a_secret_of_the_environment_is_masked_in_json_output_too(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from counterpoint import secrets
    from counterpoint.cli.render import dumps

    key = "sk-test-json-0123456789SECRET"
    monkeypatch.setenv("QA_JSON_API_KEY", key)
    secrets.register_environment()
    text = dumps({"outputs": {"leak": f"the key is {key}"}})
    assert key not in text
    assert json.loads(text) == {"outputs": {"leak": "the key is ***"}}


def test_the_ratio_to_a_critical_path_under_a_millisecond_says_what_it_measures() -> None:
    """A graph of instant steps: makespan / critical path is large and means the run's own
    overhead, which the summary says; a step of a few milliseconds gets no such note."""
    instant = cp.Graph("instant")
    instant.add("one", lambda: 1)
    assert "the ratio is mostly the run's own start and logging" in _shown(instant)

    async def slow() -> int:
        await asyncio.sleep(0.005)  # the critical path is at least this long
        return 1

    longer = cp.Graph("longer")
    longer.add("one", slow)
    text = _shown(longer)
    assert "makespan / critical path" in text and "mostly the run's own" not in text


def test_json_output_of_a_nan_or_an_infinity_is_strict_json() -> None:
    """``show --json`` of a run whose step returned ``float("nan")`` printed ``NaN``,
    which is not JSON: ``jq`` and JavaScript refused the whole document."""
    import json

    from counterpoint.cli.render import dumps, payload

    g = cp.Graph("odd")
    g.add("nan", lambda: float("nan"))
    g.add("inf", lambda: [1.5, float("-inf"), {"x": float("inf")}])
    store = cp.MemoryStore()
    result = cp.run_sync(g, store=store)
    report = log_report(store.run(result.run_id), store.events(result.run_id))
    text = dumps(payload(report))

    def refuse(constant: str) -> None:
        raise ValueError(f"not JSON: {constant}")

    data = json.loads(text, parse_constant=refuse)
    assert data["outputs"] == {"nan": None, "inf": [1.5, None, {"x": None}]}
    assert dumps({"a": 1.5}) == json.dumps({"a": 1.5}, indent=2)  # the common path
