"""The output block of a run's summary (counterpoint.cli.render.summary): bounded in
lines and in characters, whatever the graph returned."""

from __future__ import annotations

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


@pytest.mark.parametrize(("critical", "noted"), [(0.0004, True), (0.005, False)])
def test_the_ratio_to_a_critical_path_under_a_millisecond_says_what_it_measures(
        critical: float, noted: bool) -> None:
    """A graph of instant steps: makespan / critical path is large and means the run's own
    overhead, which the summary says; a step of a few milliseconds gets no such note.
    (The run's timings are set, not measured: under load an instant step took over 1 ms.)"""
    g = cp.Graph("timed")
    g.add("one", lambda: 1)
    store = cp.MemoryStore()
    result = cp.run_sync(g, store=store)
    report = log_report(store.run(result.run_id), store.events(result.run_id))
    metrics = replace(report.metrics, makespan=0.02, critical_path=critical,
                      makespan_over_critical_path=0.02 / critical)
    console = Console(width=120, record=True, markup=False)
    console.print(summary(replace(report, metrics=metrics), inspect=None))
    text = console.export_text()
    assert "makespan / critical path" in text
    assert ("the ratio is mostly the run's own start and logging" in text) is noted


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


def test_nodes_an_edit_added_are_listed_before_the_nodes_that_wait_for_them() -> None:
    """A loop's later iterations (live edits) were listed after the nodes after the loop
    (``count.1, count, report, count.2, ...``): the table lists nodes as they were added,
    each after the nodes it depends on."""
    async def grow(ctx: cp.NodeContext) -> int:
        edit = cp.Edit()
        edit.add("added", lambda: 2)
        edit.edge("added", "last")
        return ctx.apply(edit)

    g = cp.Graph("edited")
    g.add("last", lambda x: x, x=g.add("grow", grow))
    g.add("apart", lambda: 3)
    rows = [line.split()[0] for line in _shown(g).splitlines()
            if line.split() and line.split()[0] in {"grow", "last", "apart", "added"}]
    assert rows == ["grow", "apart", "added", "last"], rows
