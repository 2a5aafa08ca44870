"""CPU seconds of this process and every process below it, from Linux ``/proc``.

The benchmarks that spread work over processes (the SQLite store's writer process, Ray's
shard actors and their stores) report CPU seconds per run summed over all of them, by
role: on a machine shared with other jobs, wall times swing with the load, while the CPU
a run costs moves much less. Where there is no ``/proc`` every reading is empty and the
benchmarks print no CPU line.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

__all__ = ["Usage", "by_role", "role_of", "snapshot"]

Usage = dict[int, tuple[float, str, int]]
"""pid -> (CPU seconds, user and system, so far; command line; parent pid)."""


def snapshot() -> Usage:
    """The CPU seconds of every process this one can read (empty without ``/proc``)."""
    if not os.path.isdir("/proc"):
        return {}
    tick = os.sysconf("SC_CLK_TCK")
    out: Usage = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # ended meanwhile, or not ours to read
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # the command name may hold spaces
        out[int(name)] = ((int(fields[11]) + int(fields[12])) / tick, cmdline, int(fields[1]))
    return out


def role_of(pid: int, cmdline: str) -> str:
    """What a process of a benchmark is: this process, a store's writer, a Ray shard
    actor, or another Ray process."""
    if pid == os.getpid():
        return "this process"
    if "writer.py" in cmdline:
        return "store writers"
    if cmdline.startswith("ray::Shard"):
        return "shard actors"
    return "other processes (Ray's own)"


def by_role(before: Usage, after: Usage,
            role: Callable[[int, str], str] = role_of) -> Mapping[str, float]:
    """CPU seconds spent between the two snapshots by this process and its descendants
    (children, their children, ...), summed by ``role``. A process that ended between
    them is missed: read ``after`` before closing what the work started."""
    mine = {os.getpid()}
    grew = True
    while grew:  # parents before children is not guaranteed: repeat until nothing joins
        grew = False
        for pid, (_, _, parent) in after.items():
            if parent in mine and pid not in mine:
                mine.add(pid)
                grew = True
    spent: dict[str, float] = {}
    for pid in mine & after.keys():
        seconds, cmdline, _ = after[pid]
        used = seconds - before.get(pid, (0.0, "", 0))[0]
        if used > 0:
            key = role(pid, cmdline)
            spent[key] = spent.get(key, 0.0) + used
    return spent
