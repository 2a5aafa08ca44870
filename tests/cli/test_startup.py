"""The command line starts without the library: importing it, or printing any command's
help, loads no scheduler, model provider, planner or schema validator.

``counterpoint --help`` builds every command from its signature, so this pins that the
signatures and what they name stay cheap and that the rest is imported when a command
runs. Each check runs in a fresh interpreter, since this one has imported everything.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import counterpoint

HEAVY = ["counterpoint.api", "counterpoint.scheduler", "counterpoint.models",
         "counterpoint.agents", "counterpoint.planning", "counterpoint.workflow",
         "jsonschema", "pydantic", "llama_cpp", "openai", "anthropic",
         # typer's rich help pulls in rich.markdown and markdown-it: the help is plain
         "typer.rich_utils", "rich.markdown", "markdown_it"]
"""Modules (with their submodules) the command line must not import before a command runs."""
TYPER_NEEDS = ["pydantic"]
"""What typer itself imports once it parses a subcommand, even for its ``--help``: it
coerces the group's unset ``--help`` flag through a pydantic ``TypeAdapter``."""

SRC = Path(counterpoint.__file__).resolve().parents[1]

PRELUDE = """
import json, sys
HEAVY = json.loads(sys.argv[1])
def loaded(allowed=()):
    return sorted(m for m in sys.modules if m.partition(".")[0] not in allowed
                  and any(m == h or m.startswith(h + ".") for h in HEAVY))
"""

IMPORT = """
import counterpoint.cli
print(json.dumps(loaded()))
"""

HELP = """
import contextlib, io, typer.main
from counterpoint.cli.app import app
found = {}
for argv in [["--help"]] + [[name, "--help"] for name in typer.main.get_command(app).commands]:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
        app(argv, prog_name="counterpoint")
    found[" ".join(argv)] = loaded(() if argv == ["--help"] else json.loads(sys.argv[2]))
print(json.dumps(found))
"""


def _loaded(script: str) -> object:
    """What a fresh interpreter running ``script`` printed (as JSON) about ``HEAVY``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(SRC), *filter(None, [os.environ.get("PYTHONPATH")])])}
    proc = subprocess.run(
        [sys.executable, "-c", PRELUDE + script, json.dumps(HEAVY), json.dumps(TYPER_NEEDS)],
        env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_importing_the_cli_loads_no_library_layer() -> None:
    assert _loaded(IMPORT) == []


def test_help_of_every_command_loads_no_library_layer() -> None:
    found = _loaded(HELP)
    assert isinstance(found, dict)
    assert {"--help", "run --help", "ask --help", "plan --help"} <= set(found)
    assert found == {argv: [] for argv in found}
