"""The web view's JSON API and its access rules, through Starlette's TestClient, over runs
executed in this process into a store in memory."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

import counterpoint as cp
from counterpoint.history import project
from counterpoint.ids import RunId
from counterpoint.metrics import compute
from counterpoint.store import MemoryStore
from counterpoint.ui import create_app
from counterpoint.ui.projection import PREVIEW_CHARS

LOCAL = "http://127.0.0.1"


def _graph() -> cp.Graph:
    model = cp.Model(cp.ScriptedModel(["Lima"], name="geo"))

    async def ask(country: str) -> str:
        return (await model.generate(f"What is the capital of {country}?")).text

    def big(x: str) -> str:
        return x * (PREVIEW_CHARS + 500)

    def explode(x: str) -> str:
        raise ValueError(f"cannot explode {x}")

    g = cp.Graph("api")
    capital = g.add("ask", ask, country="Peru")
    g.add("big", big, x=capital)
    g.add("explode", explode, x=capital)
    return g


@pytest.fixture
def store() -> Iterator[MemoryStore]:
    the_store = MemoryStore()
    yield the_store
    the_store.close()


@pytest.fixture
def run_id(store: MemoryStore) -> RunId:
    result = cp.run_sync(_graph(), store=store)
    assert result.status == "failed"
    ok = cp.Graph("other")
    ok.add("one", lambda: 1)
    assert cp.run_sync(ok, store=store).status == "succeeded"
    return result.run_id


@pytest.fixture
def client(store: MemoryStore) -> TestClient:
    return TestClient(create_app(store), base_url=LOCAL)


def test_runs_are_listed_with_tokens_and_filtered(client: TestClient, run_id: RunId) -> None:
    rows = client.get("/api/runs").json()["runs"]
    assert [r["graph"] for r in rows] == ["other", "api"]  # newest first
    api_row = rows[1]
    assert api_row["run_id"] == run_id and api_row["status"] == "failed"
    assert api_row["duration"] > 0  # tokens and nodes: test_ui_rows (the stream fills them)
    assert [r["graph"] for r in client.get("/api/runs?status=failed").json()["runs"]] == ["api"]
    assert [r["graph"] for r in client.get("/api/runs?q=oth").json()["runs"]] == ["other"]
    assert client.get("/api/runs?q=nothing-like-it").json()["runs"] == []


def test_a_run_is_its_projected_log(client: TestClient, store: MemoryStore,
                                    run_id: RunId) -> None:
    data = client.get(f"/api/runs/{run_id}").json()
    events = store.events(run_id)
    state = project(run_id, events).state
    metrics = compute(state, state.finished_at or 0.0)
    assert data["seq"] == events[-1].seq
    assert data["critical"] == list(metrics.critical_path_nodes)
    assert data["metrics"]["makespan"] == pytest.approx(metrics.makespan)
    nodes = {n["id"]: n for n in data["nodes"]}
    assert {k: n["status"] for k, n in nodes.items()} == {
        "ask": "succeeded", "big": "succeeded", "explode": "failed"}
    assert nodes["big"]["deps"] == ["ask"]
    assert nodes["explode"]["error"] == "ValueError: cannot explode Lima"
    assert nodes["ask"]["calls"] == 1 and nodes["ask"]["tokens"] > 0
    assert data["run"]["status"] == "failed" and not data["run"]["can_cancel"]


def test_a_node_shows_its_model_call_and_the_prompt_is_fetched_on_demand(
        client: TestClient, run_id: RunId) -> None:
    node = client.get(f"/api/runs/{run_id}/nodes/ask").json()
    (call,) = node["model_calls"]
    assert call["model"] == "geo" and call["input_tokens"] > 0 and call["latency"] >= 0
    request = client.get(f"/api/blobs/{call['request']}").json()
    assert request["messages"][-1]["content"] == "What is the capital of Peru?"
    assert client.get(f"/api/blobs/{call['response']}").json()["text"] == "Lima"
    assert [a["kind"] for a in node["history"]] == ["node_started", "node_succeeded"]


def test_a_failed_attempt_keeps_its_traceback(client: TestClient, run_id: RunId) -> None:
    node = client.get(f"/api/runs/{run_id}/nodes/explode").json()
    failed = [a for a in node["history"] if a["kind"] == "node_failed"]
    assert failed and failed[-1]["type"] == "ValueError"
    assert "raise ValueError" in failed[-1]["traceback"]
    assert node["inputs"] == [{"node": "ask", "status": "succeeded",
                               "value": {"text": '"Lima"', "size": 6, "clipped": False}}]


def test_a_large_output_is_clipped_and_fetched_whole(client: TestClient, run_id: RunId) -> None:
    output = client.get(f"/api/runs/{run_id}/nodes/big").json()["output"]
    whole = "Lima" * (PREVIEW_CHARS + 500)
    assert output["clipped"] and len(output["text"]) == PREVIEW_CHARS
    assert output["size"] == len(json.dumps(whole))
    assert client.get(f"/api/runs/{run_id}/values/big").json() == whole


def test_the_stream_of_a_finished_run_sends_it_and_ends(client: TestClient,
                                                        run_id: RunId) -> None:
    with client.stream("GET", f"/api/runs/{run_id}/stream") as response:
        body = "".join(response.iter_text())
    frames = [f for f in body.split("\n\n") if f]
    assert frames[0].startswith("event: update\n") and frames[-1].startswith("event: end\n")
    first = json.loads(frames[0].split("data: ", 1)[1])
    assert first["reshaped"] and len(first["nodes"]) == 3


def test_mistakes_get_one_clear_error(client: TestClient, run_id: RunId) -> None:
    missing = client.get("/api/runs/r-nope")
    assert missing.status_code == 404 and "r-nope" in missing.json()["error"]
    assert client.get("/api/runs/r-nope/stream").status_code == 404
    node = client.get(f"/api/runs/{run_id}/nodes/nobody")
    assert node.status_code == 404 and "nobody" in node.json()["error"]
    assert client.get("/api/blobs/0123").status_code == 404
    done = client.post(f"/api/runs/{run_id}/cancel", headers={"X-Counterpoint": "1"})
    assert done.status_code == 409 and "already finished: failed" in done.json()["error"]
    again = client.post(f"/api/runs/{run_id}/resume", headers={"X-Counterpoint": "1"})
    assert again.status_code == 409 and "only an interrupted run" in again.json()["error"]


def test_a_token_guards_the_api_but_not_the_page(store: MemoryStore, run_id: RunId) -> None:
    client = TestClient(create_app(store, token="s3cret"), base_url="http://192.0.2.7")
    assert client.get("/").status_code == 200
    refused = client.get("/api/runs")
    assert refused.status_code == 401 and "token" in refused.json()["error"]
    assert client.get("/api/runs", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/api/runs", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    assert client.get(f"/api/runs/{run_id}?token=s3cret").status_code == 200


def test_without_a_token_only_loopback_hosts_are_answered(store: MemoryStore) -> None:
    app = create_app(store)
    assert TestClient(app, base_url="http://localhost:8321").get("/api/runs").status_code == 200
    rebound = TestClient(app, base_url="http://evil.example:8321").get("/api/runs")
    assert rebound.status_code == 403 and "loopback" in rebound.json()["error"]
    for host in ("127.0.0.2:8321", "[::1]:8321", "[::1]", "LOCALHOST"):
        assert TestClient(app).get("/api/runs", headers={"host": host}).status_code == 200
    for host in ("127.0.0.1.evil.example", "localhost.evil.example:8321", "[::2]:8321"):
        assert TestClient(app).get("/api/runs", headers={"host": host}).status_code == 403


def test_a_post_needs_the_header_a_cross_site_form_cannot_send(client: TestClient,
                                                               run_id: RunId) -> None:
    forged = client.post(f"/api/runs/{run_id}/cancel")
    assert forged.status_code == 403 and "X-Counterpoint" in forged.json()["error"]


def test_a_replan_is_shown_as_a_diff_of_the_plan() -> None:
    from counterpoint.ui.projection import plan_diffs
    plan = {"subtasks": [{"id": "t1", "worker": "w", "task": "find flights", "needs": []},
                         {"id": "t2", "worker": "w", "task": "find hotels", "needs": []}]}
    replan = {"phase": "replan", "round": 1, "applied": True, "cancelled": ["t2"],
              "edits": {"add": [{"id": "t3", "worker": "w", "task": "compare",
                                 "needs": ["t1"]}],
                        "redo": [{"id": "t1", "task": "find cheap flights"}], "cancel": ["t2"]}}
    first, second = plan_diffs([{"phase": "plan", "plan": plan, "problems": []},
                                {"phase": "verify", "round": 1}, replan])
    assert first["diff"] == [] and len(first["lines"]) == 2
    changed = [line for line in second["diff"] if line[:1] in "+-" and line[:3] not in
               ("+++", "---")]
    assert changed == ["-  t1 [w] find flights", "-  t2 [w] find hotels",
                       "+  t1 [w] find cheap flights", "+    t3 [w] compare  (needs t1)"]


def test_a_fork_and_its_parent_link_to_each_other(client: TestClient, store: MemoryStore) -> None:
    g = cp.Graph("lineage")
    g.add("b", lambda a: a + 1, a=g.add("a", lambda: 1))
    parent = cp.run_sync(g, store=store)
    child = cp.fork_sync(parent.run_id, at="b", store=store, graph=g)
    assert child.ok
    forked = client.get(f"/api/runs/{child.run_id}").json()["run"]["forked_from"]
    assert forked == {"run": parent.run_id, "seq": forked["seq"], "node": "b"}
    assert forked["seq"] > 0
    assert [r["run_id"] for r in client.get(f"/api/runs/{parent.run_id}").json()["forks"]] \
        == [child.run_id]
    with client.stream("GET", f"/api/runs/{parent.run_id}/stream") as response:
        body = "".join(response.iter_text())
    first = json.loads(body.split("\n\n")[0].split("data: ", 1)[1])
    assert [r["run_id"] for r in first["forks"]] == [child.run_id]
    assert first["run"]["forked_from"] is None


def test_a_sub_run_is_served_under_its_encoded_id(client: TestClient, store: MemoryStore) -> None:
    """A sub-run's id holds ``/`` (``RUN/node``); the page asks for it percent-encoded,
    as the link from its parent gives it, and every route answers for it."""
    from urllib.parse import quote

    inner = cp.Graph("inner")
    inner.add("think", lambda topic: topic.upper(), topic=inner.input("topic"))
    outer = cp.Graph("outer")
    outer.add("stream", inner, topic="cats")   # a node named like a route
    parent = cp.run_sync(outer, store=store).run_id
    sub = f"{parent}/stream"
    assert [c["run_id"] for c in client.get(f"/api/runs/{parent}").json()["children"]] == [sub]
    path = f"/api/runs/{quote(sub, safe='')}"
    shown = client.get(path)
    assert shown.status_code == 200, shown.text
    assert shown.json()["run"]["run_id"] == sub and shown.json()["run"]["parent"] == parent
    assert client.get(f"{path}/nodes/think").json()["id"] == "think"
    assert client.get(f"{path}/values/think").json() == "CATS"
    with client.stream("GET", f"{path}/stream") as response:
        assert response.status_code == 200 and "event: end" in "".join(response.iter_text())
    done = client.post(f"{path}/cancel", headers={"X-Counterpoint": "1"})
    assert done.status_code == 409 and sub in done.json()["error"]
    assert client.get(f"/api/runs/{quote(parent + '/nobody', safe='')}").status_code == 404


def test_a_secret_of_the_environment_is_never_sent_to_the_page(
        store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """A step that put an API key of the environment into its prompt and output: the
    node's detail, its whole value, the stored prompt and the stream all show ``***``."""
    from counterpoint import secrets

    key = "sk-test-0123456789abcdefSECRET"
    monkeypatch.setenv("QA_SERVICE_API_KEY", key)
    secrets.register_environment()
    model = cp.Model(cp.ScriptedModel([f"the key is {key}"], name="leaky"))

    async def ask() -> str:
        return (await model.generate(f"my key is {key}, keep it")).text

    g = cp.Graph("leak")
    g.add("ask", ask)
    run_id = cp.run_sync(g, store=store).run_id
    client = TestClient(create_app(store), base_url=LOCAL)
    detail = client.get(f"/api/runs/{run_id}/nodes/ask")
    digests = [call[k] for call in detail.json()["model_calls"] for k in ("request", "response")]
    bodies = [detail.text, client.get(f"/api/runs/{run_id}/values/ask").text,
              client.get(f"/api/runs/{run_id}").text,
              *[client.get(f"/api/blobs/{d}").text for d in digests]]
    with client.stream("GET", f"/api/runs/{run_id}/stream") as response:
        bodies.append("".join(response.iter_text()))
    assert all(key not in body for body in bodies)
    assert "the key is ***" in bodies[1] and any("my key is ***" in b for b in bodies[3:5])


def test_a_node_waiting_for_an_approval_shows_the_question_and_how_to_answer(
        client: TestClient, store: MemoryStore) -> None:
    async def deploy(ctx: cp.NodeContext) -> str:
        return str(await ctx.ask("deploy v2 to prod?", {"version": "v2"}))

    g = cp.Graph("release")
    g.add("deploy", deploy)
    result = cp.run_sync(g, store=store, options=cp.RunOptions(detach_when_waiting=True))
    detail = client.get(f"/api/runs/{result.run_id}/nodes/deploy").json()
    assert detail["status"] == "waiting"
    [asked] = detail["approvals"]
    assert asked["question"] == "deploy v2 to prod?" and asked["status"] == "pending"
    assert asked["payload"]["text"] == '{"version": "v2"}'
    assert asked["answer_with"] == f"counterpoint approve {asked['id']}"


def test_an_unknown_api_path_or_status_filter_is_a_json_error(client: TestClient,
                                                              run_id: RunId) -> None:
    nowhere = client.get("/api/nothing")
    assert nowhere.status_code == 404
    assert "no API path /api/nothing" in nowhere.json()["error"]
    bogus = client.get("/api/runs?status=bogus")
    assert bogus.status_code == 400
    message = bogus.json()["error"]
    assert "unknown status 'bogus'" in message and "succeeded" in message
    assert client.get("/api/runs?status=failed").json()["runs"][0]["run_id"] == run_id


def test_a_method_a_path_does_not_take_or_a_bad_limit_is_a_json_error(
        client: TestClient, run_id: RunId) -> None:
    """As the API's other refusals: JSON saying what is wrong and what to send instead
    (a GET of cancel was a bare 'Method Not Allowed'; ?limit=-5 an empty list, ?limit=abc
    the default)."""
    for method, path, allowed in (("GET", f"/api/runs/{run_id}/cancel", "POST"),
                                  ("DELETE", f"/api/runs/{run_id}", "GET"),
                                  ("POST", "/api/runs", "GET")):
        refused = client.request(method, path, headers={"X-Counterpoint": "1"})
        assert refused.status_code == 405 and allowed in refused.headers["allow"]
        assert f"{method} is not taken by {path}; use {allowed}" in refused.json()["error"]
    for limit in ("-5", "abc", "1e3"):
        bad = client.get(f"/api/runs?limit={limit}")
        assert bad.status_code == 400
        assert f"?limit={limit} is not a whole number of runs" in bad.json()["error"]
    assert len(client.get("/api/runs?limit=1").json()["runs"]) == 1
    from urllib.parse import quote
    sub = quote(f"{run_id}/each", safe="")
    refused = client.get(f"/api/runs/{sub}/cancel")
    assert f"GET is not taken by /api/runs/{sub}/cancel; use POST" in refused.json()["error"]
