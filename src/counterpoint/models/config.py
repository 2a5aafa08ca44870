"""Model names and ``counterpoint.toml``.

A model is named by one string: ``openai:gpt-4.1-mini``, ``anthropic:claude-sonnet-4-5``,
``local:smollm2`` (the embedded model, the default when nothing is configured),
``local:/path/to/file.gguf``, or a name defined in a config file::

    [defaults]
    model = "fast"                 # used when no model is given

    [models.fast]
    provider = "openai"            # openai (and any compatible server) | anthropic | local
                                   # | a kind a plugin registers (see provider_registry)
    model = "Qwen/Qwen3-8B"        # the id the endpoint knows
    base_url = "http://127.0.0.1:8000/v1"
    profile = "vllm"               # capability profile of the server kind
    api_key_env = "VLLM_API_KEY"   # keys come from the environment or a key file only
    price_input = 0.05             # USD per million tokens (omit: tokens only)
    price_output = 0.20
    context_window = 32768
    tags = ["code", "math"]        # skill tags, for routing (model = "auto")
    quality = 2                    # rank among routed models: higher is stronger
    max_concurrency = 8            # rate limits shared by every run in the process
    rpm = 600
    tpm = 1000000
    fallbacks = ["local:smollm2"]

    [models.big]                   # one model served by several replicas
    provider = "openai"
    model = "Qwen/Qwen3-32B"
    base_urls = ["http://10.0.0.5:8000/v1", "http://10.0.0.6:8000/v1"]
    balance = "sticky"             # a workflow keeps its replica's prefix cache (or round_robin)
    max_concurrency = 8            # per replica

    [goal.tokens]                  # max_tokens of one call of a goal role (counterpoint run "GOAL")
    planner = 1536
    verifier = 1024

    [health]                       # circuit breakers of every model and tool (see
    failures = 3                   # counterpoint.health.settings for every key)
    open_for = 30.0
    [health.models.fast]           # one model's, over the defaults
    failures = 5
    [health.tools.search]          # one tool's
    slow_call = 10.0

``[defaults] cache = false`` turns the response cache off. Config files are read from
``$COUNTERPOINT_CONFIG`` if set, else ``./counterpoint.toml`` and the user's
``$XDG_CONFIG_HOME/counterpoint/counterpoint.toml`` (``~/.config/...``); the working
directory's file wins name by name.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from .. import checks
from ..errors import ConfigError, UserError
from ..health.settings import SECTIONS, HealthSettings, parse_health
from ..secrets import register_secret
from . import provider_registry
from .queueing import QueueOrder
from .replicas import Balance
from .types import Usage

DEFAULT_MODEL = "local:smollm2"
LOCAL_TIMEOUT = 900.0
"""Seconds one call of the embedded model may take (``timeout`` of a ``local`` model)."""
GOAL_ROLES = ("planner", "worker", "verifier", "replanner", "synthesizer")
"""The roles of a goal run, whose per-call token limits ``[goal.tokens]`` may set."""
_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
"""The key variable a built-in kind reads when a model sets neither key option."""
_BASE_URL_ENV = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL"}
"""The endpoint variable a built-in kind's SDK reads when a model sets no ``base_url``."""


_NUMBERS: dict[str, tuple[Callable[..., None], dict[str, Any]]] = {
    "price_input": (checks.number, {}), "price_output": (checks.number, {}),
    "price_cached_input": (checks.number, {}), "context_window": (checks.whole, {"least": 1}),
    "quality": (checks.whole, {"least": 0}), "max_output_tokens": (checks.whole, {"least": 1}),
    "max_concurrency": (checks.whole, {"least": 1, "fix": "leave it out for no limit"}),
    "rpm": (checks.number, {"above": True, "fix": "leave it out for no limit"}),
    "tpm": (checks.number, {"above": True, "fix": "leave it out for no limit"}),
    "timeout": (checks.seconds, {}),
    "retries": (checks.whole, {"least": 0})}
"""A model's numeric keys and the check of each (its Field's bounds say the same)."""


class ModelConfig(BaseModel):
    """Everything counterpoint needs to call one named model."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    """The name calls are made and recorded under."""
    provider: str
    """The provider kind: ``openai``, ``anthropic``, ``local`` or one a plugin registers
    (see :mod:`counterpoint.models.provider_registry`)."""
    model: str = ""
    """The id the endpoint knows (for ``local``: a GGUF path, or ``smollm2`` or empty for
    the embedded default)."""
    base_url: str | None = None
    base_urls: tuple[str, ...] = ()
    """Several endpoints serving this model (replicas); instead of ``base_url``. A
    workflow's calls stick to one of them (see :mod:`.replicas`)."""
    balance: Balance = "sticky"
    """How calls are spread over ``base_urls``: ``sticky`` (a workflow keeps its replica,
    within a load bound) or ``round_robin``."""
    profile: str | None = None
    """Capability profile (``openai``, ``vllm``, ``sglang``, ``ollama``, ``llama.cpp``,
    ``llama-cpp-python``, ``generic``); defaults by provider and base URL."""
    api_key_env: str | None = None
    api_key_file: str | None = None
    price_input: float | None = Field(default=None, ge=0)
    """USD per million input tokens."""
    price_output: float | None = Field(default=None, ge=0)
    price_cached_input: float | None = Field(default=None, ge=0)
    """USD per million cached input tokens (defaults to ``price_input``)."""
    context_window: int | None = Field(default=None, gt=0)
    """Tokens of prompt plus answer the model takes; the router skips a model a request
    does not fit (``None``: unknown, never skipped)."""
    tags: tuple[str, ...] = ()
    """Skill tags this model is offered for by the router (empty: any tag)."""
    quality: int | None = Field(default=None, ge=0)
    """Rank among the models ``auto`` routes to, higher is stronger; a model without one is
    not routed to (see :mod:`counterpoint.routing`)."""
    max_output_tokens: int | None = Field(default=None, gt=0)
    """The most tokens one answer may have: under a budget, the bound reserved for a
    call that sets no ``max_tokens`` (and sent as its ``max_tokens``)."""
    max_concurrency: int | None = Field(default=None, gt=0)
    rpm: float | None = Field(default=None, gt=0)
    tpm: float | None = Field(default=None, gt=0)
    queue: QueueOrder = "program"
    """How calls waiting for one of ``max_concurrency`` slots are served: ``program``
    (least estimated work left across workflows, then critical path; :mod:`.queueing`)
    or ``fifo``."""
    timeout: float = Field(default=120.0, gt=0)
    """Seconds one attempt may take."""
    retries: int = Field(default=3, ge=0)
    """Further attempts after a retryable failure."""
    fallbacks: tuple[str, ...] = ()
    """Models to try, in order, when this one still fails after its retries."""
    source: str | None = None
    """Where it was defined (``file:line``), for messages."""

    @field_validator(*_NUMBERS, mode="before")
    @classmethod
    def _a_number(cls, value: Any, info: ValidationInfo) -> Any:
        """The numbers checked as every option's are (:mod:`counterpoint.checks`): no
        ``true`` for a count, no ``nan`` or ``inf``, and what it must be said once."""
        field = str(info.field_name)
        check, options = _NUMBERS[field]
        if value is not None:
            try:
                check(value, field, **options)
            except UserError as exc:
                raise ValueError(str(exc).removeprefix(f"{field} ")) from None
        return value

    @model_validator(mode="after")
    def _one_endpoint_setting(self) -> ModelConfig:
        if self.base_url and self.base_urls:
            raise ValueError("set base_url (one endpoint) or base_urls (replicas), not both")
        for url in (self.base_url, *self.base_urls):
            if url is not None and not url.startswith(("http://", "https://")):
                raise ValueError(f"base_url {url!r} is not an http:// or https:// URL; "
                                 "write it like http://127.0.0.1:8000/v1")
        if len(set(self.base_urls)) != len(self.base_urls):
            raise ValueError(f"base_urls lists an endpoint twice: {list(self.base_urls)}")
        return self

    def replica(self, url: str) -> ModelConfig:
        """This configuration pointed at one of its ``base_urls``."""
        return self.model_copy(update={"base_url": url, "base_urls": ()})

    @property
    def priced(self) -> bool:
        return self.price_input is not None and self.price_output is not None

    def cost(self, usage: Usage) -> Usage:
        """``usage`` with its cost filled in from this model's prices (if it has them)."""
        if not self.priced:
            return usage
        assert self.price_input is not None and self.price_output is not None
        cached_price = self.price_cached_input if self.price_cached_input is not None \
            else self.price_input
        fresh = max(0, usage.input_tokens - usage.cached_tokens)
        dollars = (fresh * self.price_input + usage.cached_tokens * cached_price
                   + usage.output_tokens * self.price_output) / 1e6
        return usage.model_copy(update={"cost": dollars})

    def api_key(self) -> str | None:
        """The key from ``api_key_file`` or the environment; ``None`` when none is needed.

        A key read here is registered with :mod:`counterpoint.secrets`, so no error
        message or log entry shows it.
        """
        if self.api_key_file:
            path = Path(self.api_key_file).expanduser()
            try:
                key = path.read_text().strip()
            except OSError as exc:
                raise ConfigError(f"model {self.name} ({self.source or 'built in'}): cannot "
                                  f"read api_key_file {path}: {exc.strerror}") from exc
            register_secret(key)
            return key
        variable = self.api_key_env or (None if self.base_url or self.base_urls
                                        else _KEY_ENV.get(self.provider))
        if variable is None:
            return None
        value = os.environ.get(variable)
        if not value:
            raise ConfigError(f"model {self.name}: environment variable {variable} is not set; "
                              "export it (or set api_key_file) to use this model")
        register_secret(value)
        return value

    def endpoint(self) -> str | None:
        """``base_url``, else the kind's endpoint variable (``OPENAI_BASE_URL``...) if set;
        ``None`` for the provider's default endpoint."""
        if self.base_url:
            return self.base_url
        variable = _BASE_URL_ENV.get(self.provider)
        return (os.environ.get(variable) or None) if variable else None


@dataclass(frozen=True, slots=True)
class ModelRegistry:
    """Named models from config files, and the default model's name."""

    models: dict[str, ModelConfig] = field(default_factory=dict)
    default: str = DEFAULT_MODEL
    files: tuple[Path, ...] = ()
    cache: bool = True
    """``[defaults] cache = false`` turns the response cache off for every model."""
    goal_tokens: dict[str, int] = field(default_factory=dict)
    """``[goal.tokens]``: ``max_tokens`` of one call per goal role (see :data:`GOAL_ROLES`)."""
    health: HealthSettings = field(default_factory=HealthSettings)
    """``[health]``: circuit breaker settings, put in force by the models that use this
    registry (:meth:`counterpoint.health.HealthRegistry.adopt`)."""

    def resolve(self, name: str | None = None) -> ModelConfig:
        """The configuration for ``name`` (the default model if ``None``)."""
        name = name or self.default
        if name in self.models:
            return self.models[name]
        return builtin(name, known=sorted(self.models))


def builtin(name: str, *, known: list[str] | None = None) -> ModelConfig:
    """The configuration of a ``provider:id`` name that no config file defines."""
    provider, sep, ident = name.partition(":")
    if not sep or not ident:
        configured = f"; configured names: {', '.join(known)}" if known else \
            "; no counterpoint.toml defines any names"
        raise ConfigError(f"unknown model {name!r}: use provider:model (openai:gpt-4.1-mini, "
                          f"anthropic:claude-sonnet-4-5, local:smollm2) or a name from "
                          f"counterpoint.toml{configured}")
    provider_registry.PROVIDERS.check(provider, model=name)
    return ModelConfig(name=name, provider=provider, model=ident, **_kind_defaults(provider))


def is_builtin(name: str) -> bool:
    """Whether ``name`` is a ``provider:id`` name of a known provider (:func:`builtin`
    would configure it)."""
    try:
        builtin(name)
    except ConfigError:
        return False
    return True


def _kind_defaults(provider: str) -> dict[str, Any]:
    # the embedded model decodes in this process, where nothing hangs: its calls are
    # bounded by max_tokens, and on a busy machine a plan can take minutes to write; and it
    # costs no money (a config file's prices for it, if any, win)
    return {"timeout": LOCAL_TIMEOUT, "price_input": 0.0, "price_output": 0.0} \
        if provider == "local" else {}


def config_files() -> list[Path]:
    """Config files to read, lowest precedence first."""
    explicit = os.environ.get("COUNTERPOINT_CONFIG")
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise ConfigError(f"COUNTERPOINT_CONFIG={explicit}: no such file")
        return [path]
    home = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return [p for p in (home / "counterpoint" / "counterpoint.toml",
                        Path.cwd() / "counterpoint.toml") if p.is_file()]


def load_registry(files: list[Path] | None = None) -> ModelRegistry:
    """Read the config files (see the module docstring); later files override earlier."""
    files = config_files() if files is None else files
    models: dict[str, ModelConfig] = {}
    default = os.environ.get("COUNTERPOINT_MODEL") or None
    file_default: str | None = None
    cache = True
    goal_tokens: dict[str, int] = {}
    health = HealthSettings()
    overridden: list[tuple[Path, str, str]] = []
    """Each ``[health.models.NAME]``: its file, the file's text, NAME."""
    for path in files:
        text = _read(path)
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
        unknown = set(data) - {"defaults", "models", "goal", "health"}
        if unknown:
            key = sorted(unknown)[0]
            raise ConfigError(f"{path}:{_line_of(text, key)}: unknown section {key!r}; "
                              "expected [defaults], [models.NAME], [goal.tokens] and [health]")
        if "health" in data:
            read = _health(path, text, data["health"])
            overridden += [(path, text, name) for name in read.models]
            health = read.over(health)
        defaults = data.get("defaults", {})
        _check_tables(path, text, data, defaults)
        if "model" in defaults:
            file_default = str(defaults["model"])
        if "cache" in defaults:
            if not isinstance(defaults["cache"], bool):
                raise ConfigError(f"{path}:{_line_of(text, 'cache')}: cache must be true or "
                                  f"false, not {defaults['cache']!r}")
            cache = defaults["cache"]
        goal_tokens.update(_goal_tokens(path, text, data.get("goal")))
        for name, table in (data.get("models") or {}).items():
            models[name] = _model(path, text, name, table)
    registry = ModelRegistry(models, default or file_default or DEFAULT_MODEL, tuple(files),
                             cache=cache, goal_tokens=goal_tokens, health=health)
    _check_overridden(overridden, models)
    for cfg in models.values():
        for fallback in cfg.fallbacks:
            if fallback == cfg.name:
                raise ConfigError(f"{cfg.source}: model {cfg.name!r} lists itself in "
                                  "fallbacks; name another model there (its retries "
                                  "already ask it again)")
            registry.resolve(fallback)  # fail now, not in the middle of a run
    return registry


def _model(path: Path, text: str, name: str, table: Any) -> ModelConfig:
    line = _line_of(text, f"models.{name}")
    where = f"{path}:{line}"
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: models.{name} must be a table ([models.{name}])")
    if "api_key" in table:
        raise ConfigError(f"{where}: model {name!r} has an api_key; keys never go in config "
                          "files: set api_key_env to the name of an environment variable, "
                          "or api_key_file to a file that holds the key")
    if table.get("base_urls") == []:
        raise ConfigError(f"{where}: model {name!r} is invalid: base_urls is empty; list "
                          "the replicas' URLs, or use base_url")
    if "provider" not in table and ":" in name:
        table = {**builtin(name).model_dump(exclude={"name", "source"}), **table}
    try:
        config = ModelConfig(name=name, source=where, **{
            **_kind_defaults(str(table.get("provider", ""))), **table})
    except ValidationError as exc:
        first = exc.errors()[0]
        key = str(first["loc"][0]) if first["loc"] else ""
        if first["type"] == "extra_forbidden":
            close = difflib.get_close_matches(key, ModelConfig.model_fields, n=1)
            raise ConfigError(
                f"{path}:{_line_in(text, f'models.{name}', key)}: model {name!r}: unknown "
                f"key {key!r}; " + (f"did you mean {close[0]!r}?" if close else
                                    "see the model keys in counterpoint.models.config")
                ) from None
        problems = "; ".join(
            (f"{'.'.join(str(p) for p in e['loc'])}: " if e["loc"] else "")
            + e["msg"].removeprefix("Value error, ") for e in exc.errors())
        at = f"{path}:{_line_in(text, f'models.{name}', key)}" if key in table else where
        raise ConfigError(f"{at}: model {name!r} is invalid: {problems}") from None
    except TypeError as exc:
        raise ConfigError(f"{where}: model {name!r} is invalid: {exc}") from None
    provider_registry.PROVIDERS.check(config.provider, model=name, where=where)
    return config


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        line = path.read_bytes().count(b"\n", 0, exc.start) + 1
        raise ConfigError(f"{path}:{line}: the file is not UTF-8 text ({exc.reason} at byte "
                          f"{exc.start}); save it as UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the file: {exc.strerror or exc}") from None


def _check_tables(path: Path, text: str, data: dict[str, Any], defaults: Any) -> None:
    """``[defaults]`` and ``[models]`` are tables, and ``[defaults]`` holds known keys."""
    for section, header in (("defaults", "[defaults]"), ("models", "[models.NAME]")):
        if section in data and not isinstance(data[section], dict):
            raise ConfigError(f"{path}:{_line_of(text, section)}: {section} must be a table "
                              f"({header}), not {data[section]!r}")
    unknown = sorted(set(defaults) - {"model", "cache"})
    if unknown:
        raise ConfigError(f"{path}:{_line_in(text, 'defaults', unknown[0])}: unknown key "
                          f"{unknown[0]!r} in [defaults]; it holds model and cache")


def _health(path: Path, text: str, table: Any) -> HealthSettings:
    """The ``[health]`` table; every problem named with its ``file:line``."""
    settings, problems = parse_health(table, source=f"{path}:{_line_of(text, 'health')}")
    if problems:
        raise ConfigError("\n".join(f"{path}:{_health_line(text, at)}: {message}"
                                     for at, message in problems))
    return settings


def _check_overridden(overridden: list[tuple[Path, str, str]],
                      models: Mapping[str, ModelConfig]) -> None:
    """``[health.models.NAME]`` must name a model of the files (all read: a later file's
    model may be named in an earlier one) or a ``provider:model`` name; a typo would leave
    its breaker settings silently unapplied. Tools are defined in code, so
    ``[health.tools.NAME]`` cannot be checked here."""
    problems = []
    for path, text, name in overridden:
        if name not in models and not is_builtin(name):
            problems.append(f"{path}:{_line_of(text, f'health.models.{name}')}: "
                            f"[health.models.{name}] names no model; the configured models "
                            f"are {', '.join(sorted(models)) or '(none)'}, or write a "
                            "provider:model name (openai:gpt-4.1-mini); fix the name, or "
                            f"add [models.{name}]")
    if problems:
        raise ConfigError("\n".join(problems))


def _health_line(text: str, at: tuple[str, ...]) -> int:
    if len(at) >= 2 and at[0] in SECTIONS:
        table = f"health.{at[0]}.{at[1]}"
        return _line_in(text, table, at[2]) if len(at) > 2 else _line_of(text, table)
    return _line_in(text, "health", at[0]) if at else _line_of(text, "health")


def _goal_tokens(path: Path, text: str, goal: Any) -> dict[str, int]:
    """The ``[goal.tokens]`` table: a positive whole number per known role."""
    if goal is None:
        return {}
    if not isinstance(goal, dict) or set(goal) - {"tokens"}:
        extra = sorted(set(goal) - {"tokens"}) if isinstance(goal, dict) else ["goal"]
        raise ConfigError(f"{path}:{_line_of(text, 'goal')}: unknown goal setting "
                          f"{extra[0]!r}; the [goal] section holds [goal.tokens] only "
                          f"(ROLE = N, roles: {', '.join(GOAL_ROLES)})")
    tokens = goal.get("tokens", {})
    where = f"{path}:{_line_of(text, 'goal.tokens')}"
    if not isinstance(tokens, dict):
        raise ConfigError(f"{where}: goal.tokens must be a table ([goal.tokens])")
    for role, value in tokens.items():
        line = f"{path}:{_line_in(text, 'goal.tokens', role)}"
        if role not in GOAL_ROLES:
            raise ConfigError(f"{line}: unknown goal role {role!r}; roles: "
                              f"{', '.join(GOAL_ROLES)}")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{line}: goal.tokens.{role} must be a whole number of tokens "
                              f">= 1, not {value!r}")
    return dict(tokens)


def _line_in(text: str, table: str, key: str) -> int:
    """The line of ``key =`` inside the ``[table]`` section (else the header's line)."""
    header = _line_of(text, table)
    for number, line in enumerate(text.splitlines()[header:], header + 1):
        stripped = line.strip().replace(" ", "")
        if stripped.startswith("["):
            break
        if stripped.startswith(f"{key}="):
            return number
    return header


def _line_of(text: str, key: str) -> int:
    """The line of a ``[key]`` table header (or of ``key =``), for messages."""
    quoted = key.replace("models.", 'models."', 1) + '"' if key.startswith("models.") else key
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip().replace(" ", "")
        if stripped in (f"[{key}]", f"[{quoted}]") or stripped.startswith(f"{key}="):
            return number
    return 1
