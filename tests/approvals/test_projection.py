"""The pure parts: how approval events move a node between RUNNING and WAITING, and how
a run's approvals are rebuilt from its log (and the store's answers)."""

from __future__ import annotations

import counterpoint as cp
from counterpoint.approval import Answer, approval_id, digest_of, project
from counterpoint.events import Event, EventKind
from counterpoint.ids import NodeId, RunId
from counterpoint.state import NodeStatus, RunState
from counterpoint.transitions import evolve

RUN = RunId("r")


async def work() -> int:
    return 1


def _state() -> RunState:
    g = cp.Graph("g")
    g.add("a", work, resources={"gpu": 1})
    g.add("b", work)
    topo = g.validate()
    state = RunState.new(RUN, g.name, [g.nodes[n] for n in topo.order])
    evolve(state, Event(EventKind.RUN_CREATED, 0.0))
    for node in ("a", "b"):
        evolve(state, Event(EventKind.NODE_STARTED, 1.0, NodeId(node), 1))
    return state


def _requested(aid: str, node: str = "a", attempt: int = 1) -> Event:
    return Event(EventKind.APPROVAL_REQUESTED, 2.0, NodeId(node), attempt,
                 data={"id": aid, "question": "go?", "payload": {"n": 1},
                       "digest": digest_of("go?", {"n": 1})})


def test_a_waiting_node_gives_up_its_slot_and_resources_until_every_ask_is_answered() -> None:
    state = _state()
    assert state.running == 2 and state.in_use == {"gpu": 1}
    evolve(state, _requested("x"))
    evolve(state, _requested("y"))
    assert state.nodes[NodeId("a")].status is NodeStatus.WAITING
    assert state.running == 1 and state.in_use == {"gpu": 0}
    evolve(state, Event(EventKind.APPROVAL_ANSWERED, 3.0, NodeId("a"), 1,
                        data={"id": "x", "approved": True}))
    assert state.nodes[NodeId("a")].status is NodeStatus.WAITING  # y still open
    evolve(state, Event(EventKind.APPROVAL_WITHDRAWN, 3.0, NodeId("a"), 1, data={"id": "y"}))
    assert state.nodes[NodeId("a")].status is NodeStatus.RUNNING
    assert state.running == 2 and state.in_use == {"gpu": 1}


def test_a_late_request_of_an_ended_attempt_changes_nothing() -> None:
    state = _state()
    evolve(state, _requested("x", attempt=7))
    assert state.nodes[NodeId("a")].status is NodeStatus.RUNNING and state.running == 2


def test_a_resume_sends_waiting_nodes_back_to_pending_without_releasing_twice() -> None:
    state = _state()
    evolve(state, _requested("x"))
    evolve(state, Event(EventKind.RUN_RESUMED, 5.0))
    assert state.nodes[NodeId("a")].status is NodeStatus.PENDING
    assert state.running == 0 and state.in_use == {"gpu": 0} and not state.asking


def test_the_projection_overlays_store_answers_bound_to_the_digest() -> None:
    digest = digest_of("go?", {"n": 1})
    events = [_requested("x"), _requested("y")]
    answers = {"x": Answer(approved=True, by="ana").as_data(digest),
               "y": Answer(approved=True).as_data("another digest")}
    found = project(RUN, events, answers)
    assert found["x"].status == "approved" and not found["x"].delivered
    assert found["y"].status == "pending"  # an answer to other content does not count


def test_ids_are_stable_and_change_with_the_content() -> None:
    one = approval_id(RUN, NodeId("a"), "ask-1", digest_of("go?", {"n": 1}))
    assert one == approval_id(RUN, NodeId("a"), "ask-1", digest_of("go?", {"n": 1}))
    assert one != approval_id(RUN, NodeId("a"), "ask-1", digest_of("go?", {"n": 2}))
    assert one != approval_id(RUN, NodeId("a"), "ask-2", digest_of("go?", {"n": 1}))
    assert one != approval_id(RunId("other"), NodeId("a"), "ask-1", digest_of("go?", {"n": 1}))
