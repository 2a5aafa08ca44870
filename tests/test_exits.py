"""Exit codes have one home, counterpoint.exits: no other module defines one by number."""

from __future__ import annotations

import re
from pathlib import Path

import counterpoint
from counterpoint import exits

SOURCE = Path(counterpoint.__file__).parent
DEFINED = re.compile(r"^\s*[A-Z_]*(EXIT|TERMINATED|INTERRUPTED)[A-Z_]*\s*=\s*(\d|128)", re.M)


def test_exit_codes_are_defined_only_in_counterpoint_exits() -> None:
    """Regression: WAITING_EXIT = 3 was defined in cli/approvals.py and in ui/control.py,
    TERMINATED and 130 in cli/signals.py and cli/app.py."""
    elsewhere = [f"{path.relative_to(SOURCE)}: {match.group(0).strip()}"
                 for path in sorted(SOURCE.rglob("*.py")) if path.name != "exits.py"
                 for match in DEFINED.finditer(path.read_text())]
    assert elsewhere == []
    assert (exits.SUCCEEDED, exits.FAILED, exits.MISUSE, exits.WAITING,
            exits.INTERRUPTED, exits.TERMINATED) == (0, 1, 2, 3, 130, 143)
