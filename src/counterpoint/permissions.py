"""Capabilities: what an agent role may do, enforced in code before anything runs.

An agent given ``capabilities=Capabilities(...)`` may call only the tools named in it,
with arguments its constraints accept, may cause side effects only if it allows them,
and may write only the blackboard keys it names. A call outside that set is refused
before it runs, recorded as a ``permission_denied`` event and given back to the model as
the tool's error; nothing the model says changes the set, which lives in the agent's
configuration, not in its prompt.

Capabilities hold for everything that runs under the agent: its tools, and agents it
calls as tools, whose own capabilities can only narrow them (side effects and blackboard
writes must be allowed by every agent on the way).
"""

from __future__ import annotations

import contextlib
import fnmatch
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from .errors import PermissionDenied, UserError

__all__ = ["Capabilities", "Constraint", "PermissionDenied", "acting_as"]

Constraint = Callable[[dict[str, Any]], bool | str | None] | Mapping[str, Any]
"""A check of a tool's arguments: a function returning ``True``/``None`` (allowed),
``False`` or a message (refused), or a JSON schema the arguments must match."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Capabilities:
    """An agent role's explicit capability set. Everything not granted is refused.

    ``tools``: the tool names it may call. ``board_write``: the blackboard keys it may
    write (``fnmatch`` patterns such as ``"notes.*"``; ``queue:NAME`` grants a work
    queue). ``side_effects``: whether it may call tools declared ``side_effects=True``.
    ``args``: per tool, a constraint on the arguments (see :data:`Constraint`).
    """

    tools: frozenset[str] = frozenset()
    board_write: frozenset[str] = frozenset()
    side_effects: bool = False
    args: Mapping[str, Constraint] = field(default_factory=dict, hash=False)

    def __init__(self, *, tools: Iterable[str] = (), board_write: Iterable[str] = (),
                 side_effects: bool = False,
                 args: Mapping[str, Constraint] | None = None) -> None:
        for what, names in (("tools", tools), ("board_write", board_write)):
            if isinstance(names, str):
                raise UserError(f"Capabilities({what}={names!r}): give a set of names, "
                                f"not one string: {what}={{{names!r}}}")
            odd = [n for n in names if not isinstance(n, str) or not n]
            if odd:
                raise UserError(f"Capabilities({what}=...): names must be non-empty "
                                f"strings, got {odd!r}")
        object.__setattr__(self, "tools", frozenset(tools))
        object.__setattr__(self, "board_write", frozenset(board_write))
        object.__setattr__(self, "side_effects", bool(side_effects))
        checked = dict(args or {})
        for name, constraint in checked.items():
            if isinstance(constraint, Mapping):
                try:
                    jsonschema.Draft202012Validator.check_schema(constraint)
                except jsonschema.SchemaError as exc:
                    raise UserError(f"Capabilities(args={{{name!r}: ...}}): not a valid JSON "
                                    f"schema: {exc.message}") from None
            elif not callable(constraint):
                raise UserError(f"Capabilities(args={{{name!r}: ...}}): give a function of "
                                "the arguments or a JSON schema")
            if name not in self.tools:
                raise UserError(f"Capabilities(args={{{name!r}: ...}}): {name!r} is not in "
                                f"tools={sorted(self.tools)}")
        object.__setattr__(self, "args", checked)

    def tool_refusal(self, tool: str, arguments: Mapping[str, Any], *,
                     side_effects: bool) -> tuple[str, str] | None:
        """``(what, why)`` if calling ``tool`` with ``arguments`` is outside this set."""
        if tool not in self.tools:
            return "tool", f"tool {tool!r} is not among its tools {sorted(self.tools)}"
        if side_effects and not self.side_effects:
            return "side_effects", f"tool {tool!r} has side effects, which it may not cause"
        constraint = self.args.get(tool)
        if constraint is None:
            return None
        if isinstance(constraint, Mapping):
            error = jsonschema.exceptions.best_match(
                jsonschema.Draft202012Validator(constraint).iter_errors(dict(arguments)))
            if error is None:
                return None
            where = "/".join(str(p) for p in error.absolute_path) or "(arguments)"
            return "args", f"arguments of tool {tool!r} refused at {where}: {error.message}"
        verdict = constraint(dict(arguments))
        if verdict is None or verdict is True:
            return None
        reason = verdict if isinstance(verdict, str) and verdict else "its constraint said no"
        return "args", f"arguments of tool {tool!r} refused: {reason}"

    def may_write(self, key: str) -> bool:
        """Whether a blackboard key (or ``queue:NAME``) is among ``board_write``."""
        return any(fnmatch.fnmatchcase(key, pattern) for pattern in self.board_write)


_ACTIVE: ContextVar[tuple[tuple[str, Capabilities], ...]] = ContextVar(
    "counterpoint_capabilities", default=())
"""The (role, capabilities) of every agent the caller runs under, outermost first."""


@contextlib.contextmanager
def acting_as(role: str, capabilities: Capabilities | None) -> Iterator[None]:
    """Run the body under ``role``'s capabilities (no change for ``None``)."""
    if capabilities is None:
        yield
        return
    token = _ACTIVE.set((*_ACTIVE.get(), (role, capabilities)))
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def side_effects_refusal(tool: str) -> tuple[str, str] | None:
    """``(role, why)`` if an agent the caller runs under may not cause side effects."""
    for role, capabilities in _ACTIVE.get():
        if not capabilities.side_effects:
            return role, f"tool {tool!r} has side effects, which {role} may not cause"
    return None


def write_refusal(key: str) -> tuple[str, str] | None:
    """``(role, why)`` if an agent the caller runs under may not write ``key``."""
    for role, capabilities in _ACTIVE.get():
        if not capabilities.may_write(key):
            return role, (f"{role} may not write blackboard key {key!r} (it may write "
                          f"{sorted(capabilities.board_write) or 'none'})")
    return None
