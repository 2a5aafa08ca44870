"""Checking the models a run names before it starts: key, reachability, structured output.

A run that names a model without its API key would otherwise fail once per node, each
after its retries; :func:`preflight` finds every such problem first, for all models at
once. For each named model it checks, in order: the name resolves (a known provider
kind, a configured name), its API key is present (the message names the environment
variable, the model and where the model was named), and, with ``probe``, that the
server answers a tiny structured-output request the way the model's profile says it
can (``json_schema``, llama.cpp's ``json_object`` with a schema, or a prompted schema):
a profile that does not match the server fails here, not in the middle of a run.

Results are cached per process and configuration (a second run in the same process
does not probe again); a failed check is never cached. ``counterpoint run`` calls
:func:`preflight` and :func:`raise_for` (skip with ``--no-preflight``);
``counterpoint models`` shows :class:`ModelCheck` rows as a table.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..errors import ConfigError, CounterpointError
from ..secrets import redact
from . import prompt
from .config import ModelConfig, ModelRegistry, load_registry
from .provider import Provider
from .provider_registry import build_provider
from .types import Message, OutputSpec, Request

PROBE_SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}},
                "required": ["ok"], "additionalProperties": False}
"""The structured-output probe: the smallest object a constrained decoder can write."""
PROBE_TOKENS = 24
PROBE_SECONDS = 60.0
"""Longest one probe may take (an embedded model loads its file first)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelUse:
    """A model a run names, and where it was named (for messages)."""

    name: str
    where: str
    """``file:line``, ``node 'x'``, ``--planner-model``...: where to fix it."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelCheck:
    """What :func:`preflight` found about one model."""

    name: str
    where: str
    provider: str = ""
    key: str = "-"
    """``set``, ``not needed``, or ``missing`` (the variable is in :attr:`problem`)."""
    reachable: bool | None = None
    """``None``: not checked (an earlier check failed, or no probe asked)."""
    structured: bool | None = None
    """Whether the structured-output probe got valid JSON back."""
    latency: float | None = None
    """Seconds the probe took."""
    problem: str | None = None
    """What is wrong, where, and what to do; ``None`` when the model is usable."""

    @property
    def ok(self) -> bool:
        return self.problem is None


_PASSED: dict[tuple[str, bool], ModelCheck] = {}
"""Checks that passed in this process, by the model's configuration and ``probe``."""


async def preflight(uses: Sequence[ModelUse], *, registry: ModelRegistry | None = None,
                    probe: bool = True) -> list[ModelCheck]:
    """Check every distinct model of ``uses`` (concurrently); one :class:`ModelCheck`
    each, in the order first named. Never raises for a model's problem: it is in the
    check's ``problem``."""
    first: dict[str, ModelUse] = {}
    for use in uses:
        first.setdefault(use.name, use)
    found = registry if registry is not None else load_registry()
    return list(await asyncio.gather(*(_check(u, found, probe) for u in first.values())))


def raise_for(checks: Sequence[ModelCheck]) -> None:
    """Raise one :class:`ConfigError` naming every failed check (nothing if all passed)."""
    failed = [c.problem for c in checks if c.problem is not None]
    if len(failed) == 1:
        raise ConfigError(failed[0])
    if failed:
        raise ConfigError(f"{len(failed)} models cannot be used: " + "; ".join(failed))


async def _check(use: ModelUse, registry: ModelRegistry, probe: bool) -> ModelCheck:
    check = ModelCheck(name=use.name, where=use.where)
    try:
        config = registry.resolve(use.name)
    except ConfigError as exc:
        return replace(check, problem=f"{exc} (named at {use.where})")
    check = replace(check, provider=config.provider)
    cached = _PASSED.get((config.model_dump_json(), probe))
    if cached is not None:
        return replace(cached, where=use.where)
    try:
        key = config.api_key()
    except ConfigError as exc:
        return replace(check, key="missing", problem=f"{exc} (named at {use.where})")
    check = replace(check, key="set" if key else "not needed")
    try:
        provider = build_provider(config)
    except ConfigError as exc:
        return replace(check, problem=f"{exc} (named at {use.where})")
    try:
        check = await _reach(check, provider, config, use, probe)
    finally:
        await provider.aclose()
    if check.ok:
        _PASSED[(config.model_dump_json(), probe)] = check
    return check


async def _reach(check: ModelCheck, provider: Provider, config: ModelConfig, use: ModelUse,
                 probe: bool) -> ModelCheck:
    where = f"model {config.name} (named at {use.where}"
    where += f", defined at {config.source})" if config.source else ")"
    if not probe:
        return check
    started = time.perf_counter()
    trouble = await provider.check()
    if trouble is not None:
        fix = "" if config.provider == "local" else \
            "; start the server or fix base_url, or pass --no-preflight to skip this check"
        return replace(check, reachable=False, problem=f"{where}: {redact(trouble)}{fix}")
    check = replace(check, reachable=True)
    spec = OutputSpec(name="probe", schema=PROBE_SCHEMA)
    caps = provider.capabilities
    constrained = caps.json_schema or caps.json_object_schema or caps.tool_output
    system = "Answer with JSON only." + ("" if constrained else
                                         "\n\n" + prompt.schema_instruction(spec))
    request = Request(messages=prompt.adapt(prompt.layout(
        system=system, context=(), messages=[Message.user('Reply {"ok": true}')],
        tools=())[0], caps), output=spec, temperature=0.0, max_tokens=PROBE_TOKENS)
    try:
        response = await provider.complete(request, time_limit=PROBE_SECONDS)
    except CounterpointError as exc:
        return replace(check, structured=False, latency=time.perf_counter() - started,
                       problem=f"{where}: the structured-output probe failed: "
                               f"{redact(str(exc))}; {_profile_hint(config)}")
    latency = time.perf_counter() - started
    try:
        answer = json.loads(response.text)
        valid = isinstance(answer, dict) and isinstance(answer.get("ok"), bool)
    except json.JSONDecodeError:
        valid = False
    if not valid:
        return replace(check, structured=False, latency=latency,
                       problem=f"{where}: the structured-output probe got "
                               f"{response.text[:80]!r}, not the JSON asked for; "
                               f"{_profile_hint(config)}")
    return replace(check, structured=True, latency=latency)


def _profile_hint(config: ModelConfig) -> str:
    if config.provider != "openai":
        return "check the model's configuration"
    from .openai_compat import PROFILES
    return (f"set the model's profile to the server's kind in counterpoint.toml (now "
            f"{config.profile or 'the default'}; known: {', '.join(sorted(PROFILES))})")
