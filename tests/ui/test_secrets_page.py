"""Secrets of the environment stay off the page, in a real headless chromium, also when
they hold characters JSON escapes (a password with ``"`` or ``\\``, a key with ``é``):
the page's data is JSON, where such a secret is written other than it is."""

from __future__ import annotations

import json
from typing import Any

import pytest
from ui_support import Workdir

from counterpoint import secrets
from counterpoint.store import RunStore
from counterpoint.ui.server import Server

PASSWORD = 'pa"ss\\word-0123456789é'

LEAKY = """
import os

import counterpoint as cp


def connect() -> dict[str, str]:
    return {"dsn": "postgresql://app:" + os.environ["QA_DB_PASSWORD"] + "@db/app"}


graph = cp.Graph("leaky")
graph.add("connect", connect)
"""


def test_a_secret_json_escapes_is_masked_on_the_page(
        work: Workdir, served: Server, ui_store: RunStore, page: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QA_DB_PASSWORD", PASSWORD)  # the run's and the server's environment
    secrets.register_environment()
    work.write("leaky.py", LEAKY)
    proc = work.start("run", "leaky.py", "--quiet")
    assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
    [record] = ui_store.runs()
    sent: list[str] = []
    page.on("response", lambda r: sent.append(r.text()) if "/api/" in r.url
            and "stream" not in r.url else None)
    page.goto(f"{served.base}/runs/{record.run_id}?node=connect")
    output = page.wait_for_selector("#detail >> text=postgresql://app:")
    assert "postgresql://app:***@db/app" in output.inner_text()
    whole = page.request.get(f"{served.base}/api/runs/{record.run_id}/values/connect")
    sent.append(whole.text())
    assert json.loads(sent[-1]) == {"dsn": "postgresql://app:***@db/app"}
    encoded = {PASSWORD, json.dumps(PASSWORD)[1:-1],
               json.dumps(PASSWORD, ensure_ascii=False)[1:-1]}
    assert not [(s, text) for s in encoded for text in [page.content(), *sent] if s in text]
