"""The JSON text the CLI prints for ``--json``."""

from __future__ import annotations

import json
import math
from typing import Any

from ..secrets import redact


def dumps(data: Any) -> str:
    """JSON text for ``--json`` (anything not JSON-native is written as its ``str``, a NaN
    or infinite float as ``null``, as the web view's JSON and JavaScript write them: JSON
    has no such numbers, and ``jq`` refuses Python's ``NaN``), with every configured secret
    masked, as in everything else the CLI prints (a registered secret holds no character
    JSON escapes, so the text stays valid JSON)."""
    try:
        text = json.dumps(data, indent=2, default=str, allow_nan=False)
    except ValueError:  # a NaN or an infinity somewhere: rare, so looked for only then
        text = json.dumps(_finite(data), indent=2, default=str, allow_nan=False)
    return redact(text)


def _finite(data: Any) -> Any:
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {k: _finite(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [_finite(v) for v in data]
    return data
