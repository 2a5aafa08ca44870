"""What the web view's tests share beside their fixtures (conftest.py): a module of its
own name, since ``from conftest import ...`` finds whichever conftest was imported last
when several test folders run in one session."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SRC = Path(__file__).resolve().parents[2] / "src"


@dataclass
class Workdir:
    """A directory with a store, where graphs are written and run as a user runs them."""

    path: Path
    db: str

    def write(self, name: str, text: str) -> Path:
        target = self.path / name
        target.write_text(textwrap.dedent(text))
        return target

    def start(self, *args: str) -> subprocess.Popen[bytes]:
        """``counterpoint ARGS --db DB`` in its own process, in this directory."""
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (str(SRC), os.environ.get("PYTHONPATH")) if p)}
        return subprocess.Popen([sys.executable, "-m", "counterpoint.cli", *args,
                                 "--db", self.db], cwd=self.path, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def mapped_graph(n: int) -> Any:
    """A graph mapping a one-node sub-graph over ``n`` items: ``n`` sub-runs in one run."""
    import counterpoint as cp

    inner = cp.Graph("item")
    inner.add("double", lambda x: 2 * x, x=inner.input("x"))
    outer = cp.Graph("mapped")
    outer.map("each", inner, over=outer.add("items", lambda: list(range(n))))
    return outer
