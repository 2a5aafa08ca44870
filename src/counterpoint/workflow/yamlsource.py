"""Reading a YAML file into plain data plus the line of every key and item.

PyYAML's composer keeps a mark (position) on every node; the values built here
are plain ``dict``/``list``/scalars, and :class:`YamlDocument` maps each key path
(``("steps", "extract", "task")``) to the line it was written on, so every error
about the file can say ``file:line``. Only the safe YAML subset is accepted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .errors import Problem, WorkflowError

KeyPath = tuple[str | int, ...]
"""Where a value sits in the document: mapping keys and sequence indexes."""


@dataclass(frozen=True, kw_only=True, slots=True)
class YamlDocument:
    """A parsed YAML mapping and the line (1-based) of each key path in it."""

    path: Path
    """The file as named by the caller (relative paths stay relative, for messages)."""
    data: dict[str, Any]
    lines: Mapping[KeyPath, int] = field(default_factory=dict)

    def line(self, at: KeyPath) -> int:
        """The line of ``at``, or of its closest enclosing key that has one (else 1)."""
        for end in range(len(at), 0, -1):
            found = self.lines.get(at[:end])
            if found is not None:
                return found
        return 1

    def where(self, at: KeyPath = ()) -> str:
        """``file:line`` of ``at``."""
        return f"{self.path}:{self.line(at)}"

    def problem(self, at: KeyPath, message: str, hint: str = "") -> Problem:
        """A :class:`Problem` located at ``at``."""
        return Problem(where=self.where(at), message=message, hint=hint)


def load_yaml(path: Path) -> YamlDocument:
    """Read ``path``; raises :class:`WorkflowError` if it is missing, a folder, not UTF-8
    text, not YAML, empty, not a mapping, or repeats a key."""
    text = _read_text(path)
    try:
        loader = yaml.SafeLoader(text)  # checks every character first
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        char = exc.character if isinstance(exc.character, str) else chr(exc.character)
        raise WorkflowError([Problem(
            where=f"{path}:{line}",
            message=f"the file holds a character YAML does not allow: {char!r} "
                    f"(U+{ord(char):04X}) at offset {exc.position}",
            hint="remove it; of the control characters only tab and line breaks are allowed")]
                            ) from None
    try:
        node = loader.get_single_node()
        if node is None:
            raise WorkflowError([Problem(where=f"{path}:1", message="the file is empty",
                                         hint="a workflow needs at least name and steps")])
        if not isinstance(node, yaml.MappingNode):
            raise WorkflowError([Problem(
                where=f"{path}:{node.start_mark.line + 1}",
                message="the file's top level must be a mapping (name:, steps:, ...)",
                hint="see examples/workflows/digest.yaml")])
        builder = _Builder(loader, path)
        data = builder.build(node, ())
    except _Unbuildable as exc:
        raise WorkflowError([exc.problem]) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        several = isinstance(exc, yaml.composer.ComposerError) and \
            "another document" in (exc.problem or "")
        raise WorkflowError([Problem(
            where=f"{path}:{line}",
            message="invalid YAML: a second document starts here" if several
            else f"invalid YAML: {exc.problem or exc}",
            hint="a workflow file is one document; remove this `---` and what follows, or "
                 "move it to a file of its own" if several
            else "fix the syntax (indentation, quotes, colons)")]) from None
    except yaml.YAMLError as exc:
        raise WorkflowError([Problem(where=f"{path}:1", message=f"invalid YAML: {exc}")]
                            ) from None
    finally:
        loader.dispose()
    if builder.problems:
        raise WorkflowError(builder.problems, file=str(path))
    return YamlDocument(path=path, data=data, lines=builder.lines)


def _read_text(path: Path) -> str:
    """The file's text; a file that cannot be read or is not UTF-8 is a
    :class:`WorkflowError` naming the file (and the line and byte of the first bad byte)."""
    if path.is_dir():
        raise WorkflowError([Problem(where=str(path), message="is a folder, not a workflow "
                                     "file", hint="name the .yaml file inside it")])
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise WorkflowError([Problem(where=str(path), message=f"cannot read the file: "
                                     f"{exc.strerror or exc}",
                                     hint="check the path")]) from None
    try:
        # a byte-order mark (some editors write one) is not part of the text
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise WorkflowError([Problem(
            where=f"{path}:{line}",
            message=f"the file is not UTF-8 text: byte 0x{data[exc.start]:02x} at offset "
                    f"{exc.start} (line {line}, column {column}): {exc.reason}",
            hint="save the file as UTF-8 (e.g. `iconv -f latin1 -t utf-8`), or replace "
                 "that character")]) from None


class _Builder:
    """Builds plain values from composed nodes, noting each key's line."""

    def __init__(self, loader: yaml.SafeLoader, path: Path) -> None:
        self.loader = loader
        self.path = path
        self.lines: dict[KeyPath, int] = {}
        self.problems: list[Problem] = []
        self._open: set[int] = set()  # the collections being built, to catch `&a [*a]`
        self._built = 0

    def build(self, node: yaml.Node, at: KeyPath) -> Any:
        if not isinstance(node, yaml.MappingNode | yaml.SequenceNode):
            return self.loader.construct_object(node, deep=True)
        line = node.start_mark.line + 1
        if id(node) in self._open:
            raise _Unbuildable(Problem(
                where=f"{self.path}:{line}",
                message="an alias (*name) refers to a mapping or list that contains it, so "
                        "the value would never end",
                hint="replace the alias with the value it should stand for"))
        # aliases repeat a value without writing it out again: a few lines can stand for
        # billions of values ("billion laughs"), so the plain values built are bounded
        self._built += len(node.value)
        if self._built > _MAX_VALUES:
            raise _Unbuildable(Problem(
                where=f"{self.path}:{line}",
                message=f"the file stands for more than {_MAX_VALUES:,} values once its "
                        "aliases (*name) are expanded",
                hint="write the repeated parts out, or split the workflow into files "
                     "(workflow: steps)"))
        self._open.add(id(node))
        try:
            return self._collection(node, at)
        finally:
            self._open.discard(id(node))

    def _collection(self, node: yaml.MappingNode | yaml.SequenceNode, at: KeyPath) -> Any:
        if isinstance(node, yaml.MappingNode):
            self.loader.flatten_mapping(node)  # resolves ``<<:`` merge keys
            out: dict[Any, Any] = {}
            for key_node, value_node in node.value:
                key = self.loader.construct_object(key_node, deep=True)
                if not isinstance(key, str | int | float | bool):
                    self.problems.append(Problem(
                        where=f"{self.path}:{key_node.start_mark.line + 1}",
                        message=f"keys must be plain text, got {type(key).__name__}"))
                    continue
                line = key_node.start_mark.line + 1
                key = str(key) if not isinstance(key, str) else key
                if key in out:
                    self.problems.append(Problem(
                        where=f"{self.path}:{line}",
                        message=f"key {key!r} appears twice (first on line "
                                f"{self.lines.get((*at, key), '?')})",
                        hint="remove or rename one of them"))
                    continue
                self.lines[(*at, key)] = line
                out[key] = self.build(value_node, (*at, key))
            return out
        if isinstance(node, yaml.SequenceNode):
            items = []
            for index, item in enumerate(node.value):
                self.lines[(*at, index)] = item.start_mark.line + 1
                items.append(self.build(item, (*at, index)))
            return items
        raise AssertionError(node)  # unreachable: build() passes collections only


_MAX_VALUES = 100_000
"""How many mapping entries and list items a workflow file may stand for."""


class _Unbuildable(Exception):
    """A document whose aliases cannot be expanded to plain values."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem.message)
        self.problem = problem
