"""``counterpoint models`` and ``counterpoint ask``, as a user runs them: subprocesses
with their own working directory and config, against the scripted OpenAI server and
the embedded model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from counterpoint.testing import OpenAIServer, Reply


def _cli(*args: str, cwd: Path, env: dict[str, str] | None = None,
         timeout: float = 240) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "COLUMNS": "200", **(env or {})}
    environment.pop("COUNTERPOINT_CONFIG", None)
    environment["XDG_CONFIG_HOME"] = str(cwd / "no-user-config")
    return subprocess.run([sys.executable, "-m", "counterpoint.cli", *args], cwd=cwd,
                          capture_output=True, text=True, env=environment, timeout=timeout)


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as srv:
        yield srv


def _config(tmp_path: Path, server: OpenAIServer, extra: str = "") -> None:
    (tmp_path / "counterpoint.toml").write_text(
        f'[models.fake]\nprovider = "openai"\nmodel = "gpt-test"\n'
        f'base_url = "{server.base_url}"\nprice_input = 1.0\nprice_output = 2.0\n'
        f'rpm = 120\n{extra}')


def test_models_lists_configured_models_and_reachability(tmp_path: Path,
                                                         server: OpenAIServer) -> None:
    _config(tmp_path, server, '\n[models.down]\nprovider = "openai"\nmodel = "x"\n'
                              'base_url = "http://127.0.0.1:9/v1"\n')
    server.script(Reply.json({"ok": True}), Reply.json({"ok": True}))  # two probes
    proc = _cli("models", "--json", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr  # one model cannot be reached
    rows = {r["name"]: r for r in json.loads(proc.stdout)["models"]}
    assert set(rows) == {"local:smollm2", "fake", "down"}
    local = rows["local:smollm2"]
    assert local["default"] and local["reachable"] and local["structured"], local["problem"]
    fake = rows["fake"]
    assert fake["reachable"] and fake["structured"] and fake["problem"] is None
    assert fake["price"] == "1 / 2" and fake["latency"] >= 0 and fake["key"] == "not needed"
    assert fake["source"].endswith("counterpoint.toml:1")
    assert rows["down"]["reachable"] is False and "cannot connect" in rows["down"]["problem"]
    table = _cli("models", cwd=tmp_path)
    assert "fake" in table.stdout and "120 rpm" in table.stdout and "ok" in table.stdout
    assert "down: model down" in table.stdout


def test_ask_prints_answer_usage_and_cost(tmp_path: Path, server: OpenAIServer) -> None:
    _config(tmp_path, server)
    from counterpoint.testing import Usage
    server.script(Reply.text("Kyoto is lovely.",
                             usage=Usage(prompt_tokens=1000, completion_tokens=500)))
    proc = _cli("ask", "fake", "Name a city in Japan", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Kyoto is lovely." in proc.stdout
    assert "1000 in / 500 out tokens, $0.002000" in proc.stdout
    assert server.requests[-1].body["messages"][-1]["content"] == "Name a city in Japan"


def test_ask_with_a_schema_validates_and_re_asks(tmp_path: Path, server: OpenAIServer) -> None:
    _config(tmp_path, server)
    schema = tmp_path / "city.json"
    schema.write_text(json.dumps({"type": "object", "properties": {
        "city": {"type": "string"}, "population": {"type": "integer"}},
        "required": ["city", "population"]}))
    server.script(Reply.json({"city": "Osaka"}),
                  Reply.json({"city": "Osaka", "population": 2700000}))
    proc = _cli("ask", "fake", "A city?", "--schema", str(schema), "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["output"] == {"city": "Osaka", "population": 2700000}
    assert out["usage"]["calls"] == 2
    second = server.requests[-1].body["messages"]
    assert "population" in second[-1]["content"]  # the re-ask showed the error
    assert server.requests[0].body["response_format"]["type"] == "json_object"


def test_ask_errors_are_clear(tmp_path: Path, server: OpenAIServer) -> None:
    _config(tmp_path, server)
    unknown = _cli("ask", "nope", "hi", cwd=tmp_path)
    assert unknown.returncode == 2 and "unknown model 'nope'" in unknown.stderr
    missing = _cli("ask", "fake", "hi", "--schema", "missing.json", cwd=tmp_path)
    assert missing.returncode == 2 and "--schema missing.json" in missing.stderr
    (tmp_path / "bad.json").write_text("{not json")
    bad = _cli("ask", "fake", "hi", "--schema", "bad.json", cwd=tmp_path)
    assert bad.returncode == 2 and "bad.json:1: not valid JSON" in bad.stderr
    server.script(Reply.status(401, {"error": {"message": "invalid api key"}}))
    denied = _cli("ask", "fake", "hi", cwd=tmp_path)
    assert denied.returncode == 1
    assert "fake: HTTP 401: invalid api key" in denied.stderr and not denied.stdout
    (tmp_path / "counterpoint.toml").write_text('[models.x]\nprovider = "openai"\n'
                                                'api_key = "sk-secret"\n')
    leaked = _cli("ask", "x", "hi", cwd=tmp_path)
    assert leaked.returncode == 2 and "counterpoint.toml:1" in leaked.stderr
    assert "api_key_env" in leaked.stderr and "sk-secret" not in leaked.stderr


def test_ask_names_a_server_that_does_not_listen_on_stderr(tmp_path: Path) -> None:
    with OpenAIServer() as gone:
        url = gone.base_url  # closed: nothing listens there now
    (tmp_path / "counterpoint.toml").write_text(
        f'[models.deaf]\nprovider = "openai"\nmodel = "m"\nbase_url = "{url}"\n'
        'retries = 1\n')
    proc = _cli("ask", "deaf", "hi", cwd=tmp_path)
    assert proc.returncode == 1 and not proc.stdout, proc.stdout
    assert proc.stderr.startswith(f"error: model deaf: cannot connect to {url}"), proc.stderr
    assert "start the server, or fix the model's base_url" in proc.stderr
    assert "(`counterpoint models` checks deaf's server, API key and profile)" in proc.stderr


def test_ask_points_a_wrong_profile_to_counterpoint_models(tmp_path: Path,
                                                           server: OpenAIServer) -> None:
    # a server that does not take the profile's structured-output format answers 4xx/5xx
    _config(tmp_path, server, 'profile = "openai"\nretries = 0\n')
    server.script(Reply.status(500, {"error": {"message": "Input should be 'text' or "
                                                          "'json_object'"}}))
    (tmp_path / "city.json").write_text('{"type": "object"}')
    proc = _cli("ask", "fake", "A city?", "--schema", "city.json", cwd=tmp_path)
    assert proc.returncode == 1
    assert "HTTP 500" in proc.stderr
    assert proc.stderr.rstrip().endswith(
        "(`counterpoint models` checks fake's server, API key and profile)"), proc.stderr


def test_ask_stream_says_when_a_cut_answer_is_asked_again(tmp_path: Path,
                                                          server: OpenAIServer) -> None:
    _config(tmp_path, server)
    server.script(Reply.truncated_stream("Hello there friend", chunks=2),
                  Reply.text("Hello there friend, in full."))
    proc = _cli("ask", "fake", "hi", "--stream", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    cut, note, answer = proc.stdout.splitlines()[:3]
    assert cut.startswith("Hello") and "friend" not in cut  # the cut-off text, then a note
    assert note.startswith("[model fake: the stream was cut off") and "attempt 2 of" in note
    assert answer == "Hello there friend, in full."


def test_ask_retries_as_often_as_the_library_does(tmp_path: Path, server: OpenAIServer) -> None:
    _config(tmp_path, server)
    server.script(Reply.status(429, headers={"retry-after": "0"}),
                  Reply.status(503, headers={"retry-after": "0"}), Reply.text("third time"))
    proc = _cli("ask", "fake", "hi", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "third time" in proc.stdout and server.pending == 0


def test_ask_never_prints_a_key_the_provider_echoes(tmp_path: Path,
                                                   server: OpenAIServer) -> None:
    key = "sk-echoed-by-the-server-31337"
    _config(tmp_path, server, 'api_key_env = "FAKE_KEY"\n')
    server.script(Reply.status(401, {"error": {"message": f"Incorrect API key: {key}"}}))
    proc = _cli("ask", "fake", "hi", cwd=tmp_path, env={"FAKE_KEY": key})
    assert proc.returncode == 1
    assert "Incorrect API key: ***" in proc.stderr
    assert key not in proc.stdout + proc.stderr


def test_ask_the_embedded_model_with_a_schema(tmp_path: Path) -> None:
    schema = tmp_path / "city.json"
    schema.write_text(json.dumps({"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 40}}, "required": ["city"]}))
    proc = _cli("ask", "local:smollm2", "Name a city in Japan.", "--schema", str(schema),
                "--max-tokens", "40", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert isinstance(out["output"]["city"], str) and out["output"]["city"]
    assert out["model"] == "local:smollm2" and out["usage"]["output_tokens"] > 0


MODEL_GRAPH = '''
import counterpoint as cp
from counterpoint.errors import RateLimited
from counterpoint.policy import Backoff

scripted = cp.ScriptedModel([RateLimited("slow down", model="scripted", retry_after=0.01),
                             "first answer", "second answer"])
model = cp.Model(scripted, backoff=Backoff(initial=0.01, jitter=0.0))
graph = cp.Graph("talk")


async def ask(question: str) -> str:
    return (await model.generate(question)).text

graph.add("one", ask, question="one?")
graph.add("two", ask, question="two?", after=["one"])
'''


def test_run_summary_and_show_list_the_model_calls(tmp_path: Path) -> None:
    (tmp_path / "talk.py").write_text(MODEL_GRAPH)
    run = _cli("run", "talk.py", "--db", "r.db", "--json", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout)
    assert data["models"]["calls"] == 2 and data["models"]["failed"] == 1
    shown = _cli("show", data["run_id"], "--db", "r.db", "--calls", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "2 calls, 1 failed attempt" in shown.stdout
    assert "model calls" in shown.stdout and "RateLimited: slow down" in shown.stdout
    rows = [line for line in shown.stdout.splitlines() if " scripted " in line]
    assert len(rows) == 3
    as_json = json.loads(_cli("show", data["run_id"], "--db", "r.db", "--calls", "--json",
                              cwd=tmp_path).stdout)
    assert [c["node"] for c in as_json["calls"]] == ["one", "one", "two"]


def test_ask_refuses_an_infinite_temperature_before_asking() -> None:
    from typer.testing import CliRunner

    from counterpoint.cli.app import app
    result = CliRunner().invoke(app, ["ask", "local:smollm2", "hi", "--temperature", "inf"])
    assert result.exit_code == 2
    assert result.output == "error: --temperature must be a finite number >= 0, got inf\n"
