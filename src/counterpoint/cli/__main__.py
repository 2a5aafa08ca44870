"""``python -m counterpoint.cli``: the same as the ``counterpoint`` command."""

from __future__ import annotations

from . import main

if __name__ == "__main__":
    main()
