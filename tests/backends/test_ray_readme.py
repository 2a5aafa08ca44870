"""The README's "Running on a Ray cluster" examples run as shown and print what their
comments say, joined to the session's local Ray cluster through ``$RAY_ADDRESS``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()
HEADING = "### Running on a Ray cluster"


def _section() -> str:
    return re.split(r"\n##+ ", README.split(HEADING, 1)[1], maxsplit=1)[0]


def _examples() -> dict[str, str]:
    """The section's Python examples by the file name on their first line."""
    blocks = re.findall(r"```python\n(.*?)```", _section(), flags=re.S)
    found = {}
    for block in blocks:
        lines = [line.removeprefix("  ") for line in block.splitlines()]
        found[lines[0].removeprefix("# ").strip()] = "\n".join(lines[1:]) + "\n"
    return found


def _run(argv: list[str], cwd: Path, ray_cluster: Any) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RAY_ADDRESS": ray_cluster.get_runtime_context().gcs_address,
           "NO_COLOR": "1"}
    env.pop("COUNTERPOINT_DB", None)
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=180)


def test_the_python_examples_print_what_their_comments_say(tmp_path: Path,
                                                            ray_cluster: Any) -> None:
    examples = _examples()
    assert set(examples) == {"cpu.py", "double.py"}
    for name, code in examples.items():
        (tmp_path / name).write_text(code)
        promised = re.findall(r"print\(.*\)  # (.+)", code)[-1]
        done = _run([sys.executable, name], tmp_path, ray_cluster)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == promised, name


def test_the_workers_command_runs_as_shown(tmp_path: Path, ray_cluster: Any) -> None:
    (tmp_path / "double.py").write_text(_examples()["double.py"])
    block = re.findall(r"```bash\n(.*?)```", _section(), flags=re.S)[1]
    commands = [line.strip() for line in block.splitlines()
                if line.strip() and not line.strip().startswith("#")]
    shown = [line.strip().removeprefix("# ") for line in block.splitlines()
             if line.strip().startswith("# ")]
    for command in commands:
        done = _run(["bash", "-c", command.replace("python ", f"{sys.executable} ", 1)
                     .replace("counterpoint ", f"{sys.executable} -m counterpoint.cli ", 1)],
                    tmp_path, ray_cluster)
        assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-3].startswith(shown[0].split(" · ")[0])  # runs 1000/1000 done
    assert lines[-2].startswith(shown[1].split(" in ")[0])  # 1000 runs: 1000 succeeded, ...
    assert lines[-1] == shown[2]
