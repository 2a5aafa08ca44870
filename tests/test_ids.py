"""Run ids: their shape, their order within a process, and a forked child's own ids."""

from __future__ import annotations

import os
import re

from counterpoint.ids import new_run_id

SHAPE = re.compile(r"r-\d{8}-\d{6}-[0-9a-f]{12}")


def test_ids_have_the_documented_shape_and_never_repeat() -> None:
    ids = [new_run_id() for _ in range(10_000)]
    assert all(SHAPE.fullmatch(i) for i in ids), ids[:3]
    assert len(set(ids)) == len(ids)


def test_ids_of_one_process_sort_in_the_order_they_were_made() -> None:
    ids = [new_run_id() for _ in range(10_000)]
    assert ids == sorted(ids)


def test_a_forked_child_makes_ids_of_its_own() -> None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next id, then out without running the parent's cleanup
        try:
            os.write(write, new_run_id().encode())
        finally:
            os._exit(0)
    os.close(write)
    mine = new_run_id()
    with os.fdopen(read) as pipe:
        theirs = pipe.read()
    os.waitpid(pid, 0)
    assert SHAPE.fullmatch(theirs)
    assert theirs != mine  # the same second and, without a fresh start, the same serial


def test_parents_are_the_runs_a_sub_run_is_under() -> None:
    from counterpoint.ids import parents
    assert parents("r-1") == []
    assert parents("r-1/sub") == ["r-1"]
    assert parents("r-1/sub/each[2]") == ["r-1", "r-1/sub"]
