"""Steps of the ``grade.yaml`` workflow."""

from __future__ import annotations


def praise() -> str:
    """The comment on a passing score."""
    return "passed, well done"


def advise(score: int) -> str:
    """The comment on a failing score: the chapter to revise."""
    return f"not yet, revise chapter {score // 10}"


def report(score: int, comment: str) -> str:
    """One line: the score and its comment."""
    return f"{score}: {comment}"
