"""The one error a workflow file raises before it runs, and the problems it lists.

::

    SourceError                       (counterpoint.errors)
    └── WorkflowError                 a workflow file, or the inputs given to it, are invalid;
                                      ``problems`` lists every problem found, each with
                                      ``file:line`` and a hint

Failures while a workflow runs (a template path missing from a step's output, a
condition comparing values that cannot be compared) are ordinary
:class:`~counterpoint.errors.NodeFailed` failures of the step's node.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import SourceError


@dataclass(frozen=True, kw_only=True, slots=True)
class Problem:
    """One thing wrong with a workflow file: where, what, and what to do about it."""

    where: str
    """``file:line`` of the offending key or value."""
    message: str
    hint: str = ""
    """What to change; empty when the message says it already."""

    def order(self) -> tuple[str, int]:
        """Sort key: file, then line."""
        file, _, line = self.where.rpartition(":")
        return (file, int(line)) if line.isdigit() else (self.where, 0)

    def __str__(self) -> str:
        return f"{self.where}: {self.message}" + (f"; {self.hint}" if self.hint else "")


class WorkflowError(SourceError):
    """A workflow file, or the inputs given to it, are invalid. Nothing has run.

    ``problems`` holds every problem found (not only the first), in file order.
    """

    def __init__(self, problems: Iterable[Problem], *, file: str = "") -> None:
        self.problems: tuple[Problem, ...] = tuple(problems)
        if len(self.problems) == 1:
            text = str(self.problems[0])
        else:
            head = f"{file}: {len(self.problems)} problems" if file \
                else f"{len(self.problems)} problems"
            text = head + ":\n" + "\n".join(f"  {p}" for p in self.problems)
        super().__init__(text)
