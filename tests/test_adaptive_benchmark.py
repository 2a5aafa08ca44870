"""``benchmarks/adaptive.py`` reports a missing evaluation as not available, turns an
evaluation into a summary row with its verdict, and its table lines up. (The full run
is a benchmark, not a test: scheduling at 200 workflows takes minutes.)"""

from __future__ import annotations

from benchmarks.adaptive import Row, _by_exit_code, _table, healing


def test_a_missing_module_is_not_available() -> None:
    row = _by_exit_code("no_such_evaluation", "some target", [])
    assert row.verdict == "not available" and row.measured == "-"


def test_the_healing_row_carries_its_numbers_and_verdict() -> None:
    row = healing(quick=True)
    assert row.verdict == "PASS"
    assert "fewer), success 16/16 vs 16/16" in row.measured


def test_the_table_has_a_header_and_one_line_per_row() -> None:
    lines = _table([Row(name="a", target="t", measured="m", verdict="PASS"),
                    Row(name="longer", target="tt", measured="-", verdict="MISS")]).splitlines()
    assert len(lines) == 3 and lines[0].split() == ["evaluation", "target", "measured",
                                                    "result"]
    assert lines[1].endswith("PASS") and lines[2].endswith("MISS")
    assert len({line.index(line.split()[1]) for line in lines}) == 1  # aligned columns
