"""The web view's cache of projected runs (counterpoint.ui.cache): a node's events come
from an index, a finished run's log is read once, the least recently used run goes first."""

from __future__ import annotations

import counterpoint as cp
from counterpoint.events import Event
from counterpoint.ids import NodeId, RunId
from counterpoint.store import MemoryStore
from counterpoint.ui.cache import RunCache


class _CountingStore(MemoryStore):
    """A memory store that counts whole-log reads."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def events(self, run_id: RunId) -> list[Event]:
        self.reads += 1
        return super().events(run_id)


def _run(store: MemoryStore, name: str) -> RunId:
    g = cp.Graph(name)
    g.add("b", lambda a: a + 1, a=g.add("a", lambda: 1))
    return cp.run_sync(g, store=store).run_id


def test_a_finished_run_is_read_once_and_its_nodes_events_are_indexed() -> None:
    store = _CountingStore()
    run_id = _run(store, "one")
    cache = RunCache(store)
    seen = cache.get(run_id)
    assert cache.get(run_id) is seen and store.reads == 1
    log = MemoryStore.events(store, run_id)
    assert seen.node_events(NodeId("b")) == [ev for ev in log if ev.node == "b"]
    assert seen.view.projector.state.nodes[NodeId("b")].value == "2"


def test_the_least_recently_used_run_is_dropped_first() -> None:
    store = _CountingStore()
    first, second, third = (_run(store, n) for n in ("one", "two", "three"))
    cache = RunCache(store, keep=2)
    cache.get(first)
    cache.get(second)
    cache.get(first)  # second is now the least recently used
    cache.get(third)
    reads = store.reads
    cache.get(first)
    assert store.reads == reads  # still kept
    cache.get(second)
    assert store.reads == reads + 1  # dropped, read again
