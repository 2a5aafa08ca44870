"""Breaker settings from files: ``[health]`` in ``counterpoint.toml``, ``health:`` in a
workflow.

Both have one shape: the keys of :class:`~.breaker.BreakerOptions` as defaults for every
target, and per-model and per-tool overrides of any of them::

    [health]                       # every model and tool
    failures = 3                   # consecutive failures that open a breaker
    error_rate = 0.5               # or this share of failures among the last `window` calls
    window = 20
    min_calls = 10                 # (once the window holds this many)
    slow_call = 20.0               # seconds past which a call counts as slow (default: off)
    slow_rate = 0.5                # a share of slow calls that opens it too
    open_for = 30.0                # seconds an open breaker refuses calls (the cool-down)
    probes = 1                     # calls let through half-open

    [health.models.fast]           # one model (its configured name)
    failures = 5

    [health.tools.search]          # one tool
    open_for = 120

:func:`parse_health` reads such a table into :class:`HealthSettings`, listing every
problem with the path of its key; :meth:`HealthRegistry.adopt
<counterpoint.health.HealthRegistry.adopt>` puts settings in force. A model's or tool's
override starts from the defaults of the same settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import UserError
from .breaker import BreakerOptions

KEYS: dict[str, type] = {"failures": int, "error_rate": float, "window": int,
                         "min_calls": int, "slow_call": float, "slow_rate": float,
                         "open_for": float, "probes": int}
"""The settable fields of :class:`BreakerOptions` and the kind of value each takes."""
SECTIONS = ("models", "tools")

Path = tuple[str, ...]
"""Where a key is, inside the health table: ``("models", "fast", "failures")``."""


@dataclass(frozen=True, kw_only=True, slots=True)
class HealthSettings:
    """Breaker settings: defaults and per-model / per-tool overrides (the keys given)."""

    defaults: Mapping[str, Any] = field(default_factory=dict)
    models: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    tools: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    source: str = ""
    """Where they were read (``file:line``), for messages."""

    def __bool__(self) -> bool:
        return bool(self.defaults or self.models or self.tools)

    def over(self, base: HealthSettings) -> HealthSettings:
        """These settings over ``base``, key by key (a later file over an earlier one)."""
        def merge(a: Mapping[str, Mapping[str, Any]], b: Mapping[str, Mapping[str, Any]]
                  ) -> dict[str, dict[str, Any]]:
            out = {name: dict(keys) for name, keys in a.items()}
            for name, keys in b.items():
                out[name] = {**out.get(name, {}), **keys}
            return out
        return HealthSettings(defaults={**base.defaults, **self.defaults},
                              models=merge(base.models, self.models),
                              tools=merge(base.tools, self.tools),
                              source=self.source or base.source)

    def options(self) -> BreakerOptions:
        """The defaults as breaker options."""
        return BreakerOptions(**self.defaults)

    def per_target(self) -> dict[str, BreakerOptions]:
        """Options by breaker target (``model:NAME``, ``tool:NAME``), each over the defaults."""
        out = {}
        for prefix, table in (("model", self.models), ("tool", self.tools)):
            for name, keys in table.items():
                out[f"{prefix}:{name}"] = BreakerOptions(**{**self.defaults, **keys})
        return out


def _value(key: str, value: Any) -> Any:
    """``value`` for ``key``: an int where a number may be a float is that float. Whether
    it is a number at all, and in range, :class:`BreakerOptions` checks (with
    :mod:`counterpoint.checks`, as for options given in Python)."""
    if KEYS[key] is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def _keys(table: Any, at: Path, problems: list[tuple[Path, str]],
          sections: bool) -> dict[str, Any]:
    if not isinstance(table, Mapping):
        problems.append((at, f"{'.'.join(('health', *at))} must be a table of settings "
                             f"({', '.join(KEYS)}), not {table!r}"))
        return {}
    keys: dict[str, Any] = {}
    for key, value in table.items():
        if sections and key in SECTIONS:
            continue
        if key not in KEYS:
            extra = " and the tables models.NAME and tools.NAME" if sections else ""
            problems.append(((*at, key), f"unknown health setting {key!r}; the settings are "
                                         f"{', '.join(KEYS)}{extra}"))
            continue
        keys[key] = _value(key, value)
    return keys


def parse_health(table: Any, *, source: str = "") -> tuple[HealthSettings,
                                                           list[tuple[Path, str]]]:
    """``table`` (a TOML table or YAML mapping) as settings, and every problem found with
    the path of its key (the settings leave the bad keys out)."""
    problems: list[tuple[Path, str]] = []
    defaults = _keys(table, (), problems, sections=True)
    named: dict[str, dict[str, dict[str, Any]]] = {"models": {}, "tools": {}}
    if isinstance(table, Mapping):
        for section in SECTIONS:
            entries = table.get(section, {})
            if not isinstance(entries, Mapping):
                problems.append(((section,), f"health.{section} must be a table of "
                                             f"NAME = {{settings}}, not {entries!r}"))
                continue
            for name, keys in entries.items():
                named[section][str(name)] = _keys(keys, (section, str(name)), problems,
                                                  sections=False)
    settings = HealthSettings(defaults=defaults, models=named["models"],
                              tools=named["tools"], source=source)
    if not problems:  # the values' ranges and relations (min_calls <= window)
        for at, keys in [((), defaults),
                         *((("models", n), k) for n, k in named["models"].items()),
                         *((("tools", n), k) for n, k in named["tools"].items())]:
            try:
                BreakerOptions(**{**defaults, **keys})
            except UserError as exc:
                for message in str(exc).removeprefix("BreakerOptions: ").split("; "):
                    key = next((k for k in KEYS if message.startswith(f"{k} ")), None) \
                        or next((k for k in ("min_calls", "window") if k in keys), None)
                    problems.append(((*at, key) if key in keys else at, message))
                if not at:
                    break  # the defaults are wrong: every override would say so again
    return settings, problems
