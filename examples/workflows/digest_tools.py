"""Tools and helpers of the ``digest.yaml`` workflow: find, read and cite documents."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def list_documents(folder: str) -> list[str]:
    """The paths of the .txt documents in ``folder``, sorted by name.

    Args:
        folder: The folder to look in.
    """
    found = sorted(Path(folder).glob("*.txt"))
    if not found:
        raise FileNotFoundError(f"no .txt documents in {folder}")
    return [str(path) for path in found]


def read_document(path: str) -> str:
    """The text of the document at ``path``.

    Args:
        path: A path returned by list_documents.
    """
    return Path(path).read_text(encoding="utf-8").strip()


def number_notes(notes: list[dict[str, Any]]) -> str:
    """The extracted notes as a numbered list, ``[n] title: points``, for citing."""
    lines = []
    for number, note in enumerate(notes, start=1):
        points = "; ".join(str(p) for p in note.get("points", []))
        lines.append(f"[{number}] {note.get('title', '')}: {points}")
    return "\n".join(lines)


def assemble(digest: str, notes: list[dict[str, Any]], paths: list[str]) -> dict[str, Any]:
    """The digest with its list of sources (one per document, in citation order)."""
    sources = [{"cite": f"[{n}]", "title": note.get("title", ""), "file": Path(path).name}
               for n, (note, path) in enumerate(zip(notes, paths, strict=True), start=1)]
    listing = "\n".join(f"{s['cite']} {s['title']} ({s['file']})" for s in sources)
    return {"digest": digest.strip(), "sources": sources,
            "text": f"{digest.strip()}\n\nSources:\n{listing}"}
