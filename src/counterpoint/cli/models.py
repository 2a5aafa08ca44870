"""``counterpoint models`` and ``counterpoint ask``: check a model configuration.

``models`` lists the configured models (and the built-in default) and whether
each can be reached; it exits with 1 when one cannot. ``ask`` makes one call and
prints the answer, its usage and cost; with ``--schema`` the answer must validate
against a JSON schema file.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import CounterpointError, ModelError
from ..exits import FAILED

# The commands' signatures are all `counterpoint --help` needs from this module; the
# providers, pydantic and jsonschema are imported when a command runs (see cli/app.py).
if TYPE_CHECKING:
    from rich.text import Text

    from ..models import ModelConfig

MODELS_HELP = "List configured models and whether each is reachable."
ASK_HELP = "Make one call to MODEL and print the answer, usage and cost."


def models_command(
    check: Annotated[bool, typer.Option(
        "--check/--no-check", help="Probe each model with a tiny structured-output request "
                                   "(default: yes; --no-check checks only the keys).")] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print the list as JSON.")] = False,
) -> None:
    from rich.table import Table
    from rich.text import Text

    from .. import loop
    from ..models import load_registry
    from ..models.preflight import ModelUse, preflight
    from .console import make_console, reported
    from .spinner import Working
    out = make_console()
    with reported():
        registry = load_registry()
        configs = list(registry.models.values())
        if registry.default not in registry.models:
            configs.insert(0, registry.resolve(registry.default))
        uses = [ModelUse(name=c.name, where=c.source or "built in") for c in configs]
        with Working(f"checking {len(uses)} model{'s' if len(uses) > 1 else ''}"):
            checks = {c.name: c for c in loop.run(preflight(uses, registry=registry,
                                                            probe=check))}
    rows: list[dict[str, Any]] = []
    for c in configs:
        found = checks[c.name]
        rows.append({
            "name": c.name, "default": c.name == registry.default, "provider": c.provider,
            "model": c.model or "(embedded)", "endpoint": c.base_url or _endpoint(c),
            "profile": c.profile or _default_profile(c), "price": _price(c),
            "limits": _limits(c), "fallbacks": list(c.fallbacks),
            "source": c.source or "built in", "key": found.key, "reachable": found.reachable,
            "structured": found.structured,
            "latency": None if found.latency is None else round(found.latency, 3),
            "problem": found.problem})
    failed = any(r["problem"] is not None for r in rows)
    if as_json:
        out.print_json(json.dumps({"models": rows, "config_files": [
            str(f) for f in registry.files]}))
        if failed:
            raise typer.Exit(FAILED)
        return
    table = Table(box=None, pad_edge=False)
    for column in ("name", "provider", "model", "profile", "price $/M in/out", "limits",
                   "key", "reachable", "structured output", "latency"):
        table.add_column(column)
    for row in rows:
        name = str(row["name"]) + (" (default)" if row["default"] else "")
        latency = "-" if row["latency"] is None else f"{row['latency']:.2f}s"
        table.add_row(Text(name, style="bold"), *(str(row[k]) for k in (
            "provider", "model", "profile", "price", "limits")),
            _key_cell(str(row["key"])), _yes_no(row["reachable"]), _yes_no(row["structured"]),
            latency)
    out.print(table)
    for row in rows:
        if row["problem"] is not None:
            out.print(Text(f"{row['name']}: {row['problem']}", style="red"), soft_wrap=True)
    files = ", ".join(str(f) for f in registry.files) or \
        "none (looked for ./counterpoint.toml and ~/.config/counterpoint/counterpoint.toml)"
    out.print(Text(f"config files: {files}", style="dim"))
    if failed:
        raise typer.Exit(FAILED)


def _yes_no(value: bool | None) -> Text:
    from rich.text import Text
    if value is None:
        return Text("not checked", style="dim")
    return Text("ok", style="green") if value else Text("no", style="red")


def _key_cell(key: str) -> Text:
    from rich.text import Text
    return Text(key, style="red" if key == "missing" else "green" if key == "set" else "dim")


def _default_profile(config: ModelConfig) -> str:
    if config.provider != "openai":
        return "-"
    return "generic" if config.base_url else "openai"


def _endpoint(config: ModelConfig) -> str:
    return {"openai": "api.openai.com", "anthropic": "api.anthropic.com",
            "local": "in process"}.get(config.provider, "the provider's default")


def _price(config: ModelConfig) -> str:
    if not config.priced:
        return "unknown"
    return f"{config.price_input:g} / {config.price_output:g}"


def _limits(config: ModelConfig) -> str:
    parts = [f"{config.max_concurrency} at once" if config.max_concurrency else "",
             f"{config.rpm:g} rpm" if config.rpm else "",
             f"{config.tpm:g} tpm" if config.tpm else ""]
    return ", ".join(p for p in parts if p) or "-"


def ask_command(
    model: Annotated[str, typer.Argument(help="A model name: provider:id or a configured name.")],
    prompt: Annotated[str, typer.Argument(help="The question.")],
    schema: Annotated[Path | None, typer.Option(
        "--schema", metavar="FILE", help="A JSON schema file the answer must match.")] = None,
    system: Annotated[str | None, typer.Option("--system", help="A system prompt.")] = None,
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=1)] = 256,
    temperature: Annotated[float, typer.Option("--temperature", min=0.0)] = 0.0,
    stream: Annotated[bool, typer.Option("--stream/--no-stream",
                                         help="Print the answer as it arrives.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    import pydantic
    from rich.text import Text

    from .. import loop
    from ..checks import number
    from ..models import Model
    from ..secrets import redact
    from .console import fail, make_console, reported
    from .spinner import Working
    out = make_console()
    output: Any = None
    with reported():  # typer's min= lets nan and inf through
        number(temperature, "--temperature")
    if schema is not None:
        try:
            document = json.loads(schema.read_text())
        except OSError as exc:
            fail(f"--schema {schema}: {exc.strerror}")
        except json.JSONDecodeError as exc:
            fail(f"--schema {schema}:{exc.lineno}: not valid JSON: {exc.msg}")
        if not isinstance(document, dict):
            fail(f"--schema {schema}: a JSON schema must be an object")
        output = _schema_type(schema, document)
    printer = _Printer(out) if stream and not as_json else None
    working = Working(f"asking {model}")
    # the spinner counts streamed pieces; it stays off while the answer itself is printed
    sink = printer or (working.stream if working.shown else False)
    with reported():
        started = time.perf_counter()
        try:
            with working if printer is None else contextlib.nullcontext():
                result = loop.run(Model(model, cache=False).generate(  # the library's retries
                    prompt, system=system, output=output, max_tokens=max_tokens,
                    temperature=temperature, stream=sink))
        except ModelError as exc:
            make_console(stderr=True).print(Text(f"error: {redact(str(exc))}{_check_hint(model)}",
                                                 style="red"), soft_wrap=True)
            raise typer.Exit(FAILED) from None
        elapsed = time.perf_counter() - started
    usage = result.usage
    cut = result.response.finish_reason == "length"
    answer: Any = result.output.root if isinstance(result.output, pydantic.RootModel) \
        else result.output
    if as_json:
        out.print_json(json.dumps({
            "model": result.model, "text": result.text, "output": answer,
            "usage": usage.model_dump(), "finish_reason": result.response.finish_reason,
            "seconds": round(elapsed, 3)}))
        return
    if printer is not None:
        out.print()
    elif answer is not None:
        out.print_json(json.dumps(answer))
    else:
        out.print(result.text, soft_wrap=True)
    cost = "cost unknown (no price configured)" if usage.cost is None else \
        f"${usage.cost:.6f}"
    out.print(Text(f"{result.model}: {usage.input_tokens} in / {usage.output_tokens} out "
                   f"tokens, {cost}, {elapsed:.2f}s", style="dim"))
    if cut:
        make_console(stderr=True).print(Text(
            f"note: the answer was cut off at the token limit (--max-tokens {max_tokens}); "
            "raise --max-tokens for a complete answer", style="yellow"), soft_wrap=True)


def _check_hint(name: str) -> str:
    """For a model served over HTTP: how to find out whether its server, key and profile
    are right (a wrong profile shows up as a 400 or 500 about the request's format)."""
    from ..models import load_registry
    try:
        config = load_registry().resolve(name)
    except CounterpointError:
        return ""
    if config.provider == "local":
        return ""
    return f" (`counterpoint models` checks {name}'s server, API key and profile)"


class _Printer:
    """``ask --stream``'s sink: prints the deltas, and a note when a cut-off answer is
    asked again (its text so far is abandoned; the answer starts anew below it)."""

    def __init__(self, out: Any) -> None:
        self.out = out

    def __call__(self, piece: str) -> None:
        self.out.print(piece, end="", soft_wrap=True)

    def restart(self, note: str) -> None:
        from rich.text import Text

        from ..secrets import redact
        self.out.print()
        self.out.print(Text(f"[{redact(note)}]", style="yellow"), soft_wrap=True)


def _schema_type(path: Path, document: dict[str, Any]) -> Any:
    """A type whose JSON schema is ``document`` and that accepts only matching JSON."""
    import jsonschema
    import pydantic

    from ..models.types import OutputSpec
    from .console import fail
    spec = OutputSpec(name=path.stem, schema=document)

    try:
        validator = jsonschema.Draft202012Validator(document)
        validator.check_schema(document)
    except jsonschema.SchemaError as exc:
        fail(f"--schema {path}: not a valid JSON schema: {exc.message}")

    class FromSchema(pydantic.RootModel[Any]):
        @classmethod
        def __get_pydantic_json_schema__(cls, core: Any, handler: Any) -> dict[str, Any]:
            return dict(spec.schema_)

        @pydantic.model_validator(mode="after")
        def _matches(self) -> FromSchema:
            errors = sorted(validator.iter_errors(self.root), key=lambda e: list(e.path))
            if errors:
                raise ValueError("; ".join(
                    f"{'.'.join(str(p) for p in e.path) or '(root)'}: {e.message}"
                    for e in errors[:5]))
            return self

    FromSchema.__name__ = spec.name
    return FromSchema
