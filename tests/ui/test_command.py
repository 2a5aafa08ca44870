"""``counterpoint ui`` as a user starts it: a real process, its printed URL, its errors."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ui_support import SRC

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(
    p for p in (str(SRC), os.environ.get("PYTHONPATH")) if p)}


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "counterpoint.cli", *args], cwd=cwd,
                          env=ENV, capture_output=True, text=True, timeout=60)


@pytest.fixture
def serving(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """``counterpoint ui`` started with the marker's arguments; yields (its first line,
    the URL in it)."""
    args = request.node.get_closest_marker("ui_args").args
    proc = subprocess.Popen([sys.executable, "-m", "counterpoint.cli", "ui", "--db",
                             str(tmp_path / "runs.db"), *args], cwd=tmp_path, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = ""
        while "counterpoint ui:" not in line:  # blocks until the server prints its URL
            line = proc.stdout.readline()
            assert line, f"counterpoint ui exited: {proc.stderr.read() if proc.stderr else ''}"
        yield line, line.split()[2]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.ui_args("--port", "0")
def test_it_prints_the_url_it_serves(serving: tuple[str, str]) -> None:
    line, url = serving
    assert "runs.db" in line  # it says which store it serves
    assert url.startswith("http://127.0.0.1:") and "token" not in url
    with urllib.request.urlopen(url + "api/runs", timeout=10) as response:
        assert json.load(response)["runs"] == []
    with urllib.request.urlopen(url, timeout=10) as response:
        assert b"<title>counterpoint</title>" in response.read()


@pytest.mark.ui_args("--port", "0", "--host", "0.0.0.0")
def test_another_address_gets_a_generated_token_the_api_requires(
        serving: tuple[str, str]) -> None:
    _, url = serving
    base, _, token = url.partition("?token=")
    assert len(token) >= 20
    port = base.rstrip("/").rpartition(":")[2]
    local = f"http://127.0.0.1:{port}/api/runs"
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(local, timeout=10)
    assert refused.value.code == 401
    with urllib.request.urlopen(f"{local}?token={token}", timeout=10) as response:
        assert json.load(response)["runs"] == []


@pytest.mark.ui_args("--port", "0", "--host", "127.0.0.2")
def test_any_loopback_address_serves_the_page_without_a_token(
        serving: tuple[str, str], browser: Any) -> None:
    """127.0.0.0/8 is this machine's alone, as ``counterpoint ui`` judges when it serves
    there without a token; the page it then prints must not be refused."""
    _, url = serving
    assert url.startswith("http://127.0.0.2:") and "token" not in url
    page = browser.new_page()
    try:
        page.goto(url)
        page.wait_for_selector("text=no runs in this store yet")
    finally:
        page.close()
    with urllib.request.urlopen(url + "api/runs", timeout=10) as response:
        assert json.load(response)["runs"] == []


def test_ctrl_c_stops_it_while_pages_follow_a_live_run(tmp_path: Path, browser: Any) -> None:
    """The runs list and a running run's page each hold an event stream open, which
    never ends by itself: one Ctrl-C must still stop the server, without a traceback."""
    (tmp_path / "held.py").write_text(HELD)
    db = str(tmp_path / "runs.db")
    run = subprocess.Popen([sys.executable, "-m", "counterpoint.cli", "run", "held.py",
                            "--db", db, "--quiet"], cwd=tmp_path, env=ENV,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ui = subprocess.Popen([sys.executable, "-m", "counterpoint.cli", "ui", "--db", db,
                           "--port", "0"], cwd=tmp_path, env=ENV, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    context = browser.new_context()
    try:
        assert ui.stdout is not None and ui.stderr is not None
        line = ""
        while "counterpoint ui:" not in line:  # blocks until the server prints its URL
            line = ui.stdout.readline()
            assert line, f"counterpoint ui exited: {ui.stderr.read()}"
        url = line.split()[2]
        listing, watching = context.new_page(), context.new_page()
        listing.goto(url)
        run_id = listing.wait_for_selector("tr[data-run]").get_attribute("data-run")
        watching.goto(f"{url}runs/{run_id}")
        watching.wait_for_selector('#dag [data-node="held"][data-status="running"]')
        ui.send_signal(signal.SIGINT)
        assert ui.wait(timeout=30) == 0  # it waited for the streams to end: for ever
        assert "Traceback" not in ui.stderr.read()
    finally:
        context.close()
        for proc in (ui, run):
            if proc.poll() is None:
                proc.kill()
            proc.wait()


HELD = """
import asyncio

import counterpoint as cp


async def held() -> None:
    await asyncio.sleep(600)


graph = cp.Graph("held")
graph.add("held", held)
"""


def test_a_port_in_use_is_one_error_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _cli("ui", "--db", str(tmp_path / "runs.db"), "--port", str(port), cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("error: cannot listen on 127.0.0.1:") and "--port" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(("host", "hint"), [
    ("999.1.1.1", "--host 999.1.1.1 is not an address of this machine"),
    ("192.0.2.254", "--host 192.0.2.254 is not an address of this machine"),
])
def test_a_host_that_cannot_be_bound_names_the_host_not_the_port(
        tmp_path: Path, host: str, hint: str) -> None:
    done = _cli("ui", "--db", str(tmp_path / "runs.db"), "--port", "0", "--host", host,
                cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: cannot listen on {host}:0") and hint in done.stderr
    assert "pick another --port" not in done.stderr and "Traceback" not in done.stderr


def test_a_store_in_memory_is_refused(tmp_path: Path) -> None:
    done = _cli("ui", "--db", "memory", cwd=tmp_path)
    assert done.returncode == 2 and "needs a store that other processes write" in done.stderr


def test_every_address_says_the_url_for_other_machines(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "counterpoint.cli", "ui", "--db",
                             str(tmp_path / "runs.db"), "--host", "0.0.0.0", "--port", "0"],
                            cwd=tmp_path, env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        first = ""
        while "counterpoint ui:" not in first:  # blocks until the server prints its URL
            first = proc.stdout.readline()
            assert first, "counterpoint ui exited"
        second = proc.stdout.readline()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    url = first.split()[2]
    port_and_token = url.partition("0.0.0.0")[2]
    assert second.strip() == f"from other machines: http://{socket.gethostname()}" \
        f"{port_and_token}"


@pytest.mark.ui_args("--port", "0")
def test_a_port_another_web_view_serves_says_which_store_and_its_url(
        serving: tuple[str, str], tmp_path: Path) -> None:
    _, url = serving
    port = url.rstrip("/").rpartition(":")[2]
    same = _cli("ui", "--db", str(tmp_path / "runs.db"), "--port", port, cwd=tmp_path)
    assert same.returncode == 2 and "Traceback" not in same.stderr
    assert f"`counterpoint ui` already serves this store there: open {url}" in same.stderr
    other = _cli("ui", "--db", str(tmp_path / "other.db"), "--port", port, cwd=tmp_path)
    assert other.returncode == 2
    assert f"another `counterpoint ui` serves store {tmp_path / 'runs.db'} there" in \
        other.stderr and "pick another --port" in other.stderr


def test_a_store_path_no_run_could_create_is_one_error_not_a_promise(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("not a directory")
    done = _cli("ui", "--db", str(tmp_path / "afile" / "runs.db"), "--port", "0",
                cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "is a file, not a directory" in done.stderr
    assert "the page fills in" not in done.stdout  # it said so, then refused the path
