"""``benchmarks/cpu_usage.py`` counts the CPU of this process's children, by role, and
only theirs."""

from __future__ import annotations

import subprocess
import sys

import pytest

from benchmarks import cpu_usage

_BURN = """
import sys, time
while time.process_time() < 0.2:  # its own CPU time, not the clock
    pass
print("burnt", flush=True)
sys.stdin.read()  # stays alive (and readable in /proc) until the test closes its input
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_childs_cpu_is_counted_under_its_role_while_it_runs() -> None:
    before = cpu_usage.snapshot()
    child = subprocess.Popen([sys.executable, "-c", _BURN, "writer.py"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "burnt\n"
        after = cpu_usage.snapshot()
        spent = cpu_usage.by_role(before, after)
        alone = cpu_usage.by_role(
            before, after, lambda pid, _: "child" if pid == child.pid else "rest")
    finally:
        child.communicate("")
    assert spent["store writers"] >= 0.15  # its 0.2 s, in clock ticks
    # This test's process may have other children meanwhile (a session fixture's database
    # server or Ray cluster, under pytest-xdist), so only the child's own share is exact.
    assert 0.15 <= alone["child"] <= spent["store writers"]
    assert cpu_usage.role_of(child.pid, "ray::Shard.run_batch") == "shard actors"


def test_processes_outside_this_tree_are_not_counted() -> None:
    stranger = {1: (100.0, "init", 0)}
    assert cpu_usage.by_role({}, stranger) == {}
