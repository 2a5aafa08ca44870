"""The bundled digest workflow, end to end on the embedded model (about a minute on 2 cores).

Structure only: a 135M model's prose is not asserted, only that every document got an
extraction with a title and points, and that the synthesis produced text citing them.
"""

from __future__ import annotations

from pathlib import Path

import counterpoint as cp
from counterpoint.workflow import load_workflow

DIGEST = Path(__file__).resolve().parents[1] / "examples" / "workflows" / "digest.yaml"


def test_digest_example_runs_on_the_embedded_model() -> None:
    wf = load_workflow(DIGEST)
    result = cp.run_sync(wf.graph, inputs=wf.bind_inputs({}), store="memory")
    assert result.ok, {k: n.error for k, n in result.nodes.items() if n.error}
    documents = sorted(p.name for p in (DIGEST.parent / "docs").glob("*.txt"))
    extractions = result["extract"]
    assert len(extractions) == len(documents) == 4
    for note in extractions:
        assert note["title"].strip()
        assert 2 <= len(note["points"]) <= 3
    digest = result.output
    assert digest["digest"].strip()
    assert [s["file"] for s in digest["sources"]] == documents
    assert "Sources:\n[1] " in digest["text"]
    assert result.usage.calls >= 5  # one extraction per document and the synthesis
