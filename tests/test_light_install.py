"""The light install: without llama-cpp-python (the ``local`` extra) counterpoint imports,
runs graphs and calls other providers; asking for the embedded model is one clear error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# a meta path finder that makes llama_cpp unimportable, as on a machine without the extra
BLOCKER = '''
import sys
class _NoLlama:
    def find_spec(self, name, path=None, target=None):
        if name == "llama_cpp" or name.startswith("llama_cpp."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _NoLlama())
'''

GRAPH_RUN = BLOCKER + '''
import counterpoint as cp

def double(x: int) -> int:
    return 2 * x

g = cp.Graph("plain")
a = g.add("a", double, x=2)
g.add("b", double, x=a)
result = cp.run_sync(g, store="memory")
assert "llama_cpp" not in sys.modules
print(result.status.value, result["b"])
'''

CLI_RUN = BLOCKER + '''
from counterpoint.cli import main
sys.argv = ["counterpoint", *sys.argv[1:]]
main()
'''


def _python(code: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_CONFIG_HOME": str(cwd / "none")}
    env.pop("COUNTERPOINT_CONFIG", None)
    env.pop("COUNTERPOINT_MODEL", None)
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True,
                          text=True, env=env, timeout=120)


def test_a_graph_without_models_runs_without_llama_cpp(tmp_path: Path) -> None:
    proc = _python(GRAPH_RUN, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["succeeded", "8"]


def test_the_embedded_model_without_llama_cpp_is_one_clear_error(tmp_path: Path) -> None:
    proc = _python(CLI_RUN, "run", "Compare two cities", "--db", "r.db", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "the embedded model needs llama-cpp-python: pip install 'counterpoint[local]'" \
        in lines[0]
    assert "local:smollm2" in lines[0]
