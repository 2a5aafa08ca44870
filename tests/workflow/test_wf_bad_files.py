"""A workflow file that cannot be read as a workflow (not UTF-8, a forbidden character,
bad YAML, empty, not a mapping, a folder) is one ``WorkflowError`` naming the file and
line, and ``counterpoint run`` prints it as one ``error:`` line and exits with 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from counterpoint.cli.app import app
from counterpoint.workflow import WorkflowError, load_workflow

GOOD = "name: ok\nsteps:\n  a: {python: 'json:dumps', args: {obj: [1]}}\n"

# (file name, content, the message the error starts with after the path)
BAD: list[tuple[str, bytes, str]] = [
    ("latin1.yaml", "name: caf\xe9\nsteps: {}\n".encode("latin-1"),
     ":1: the file is not UTF-8 text: byte 0xe9 at offset 9 (line 1, column 10): "
     "invalid continuation byte; save the file as UTF-8"),
    ("utf16.yaml", GOOD.encode("utf-16"),
     ":1: the file is not UTF-8 text: byte 0xff at offset 0 (line 1, column 1): "
     "invalid start byte"),
    ("late.yaml", b"name: x\nsteps:\n  a: {python: 'm:f'}  # \xff\n",
     ":3: the file is not UTF-8 text: byte 0xff at offset 39 (line 3, column 25)"),
    ("control.yaml", b"name: x\nsteps:\n  a: \x01\n",
     ":3: the file holds a character YAML does not allow: '\\x01' (U+0001) at offset 20; "
     "remove it"),
    ("syntax.yaml", b"name: x\nsteps:\n  a: {python: m:f\n", ":4: invalid YAML:"),
    ("empty.yaml", b"", ":1: the file is empty; a workflow needs at least name and steps"),
    ("comments.yaml", b"# nothing here\n", ":1: the file is empty"),
    ("list.yaml", b"\n- name: x\n", ":2: the file's top level must be a mapping"),
    ("twice.yaml", b"name: x\n---\nname: y\n", ":2: invalid YAML: a second document starts "
     "here; a workflow file is one document"),
    # an alias inside the value it names never ends (it was a RecursionError traceback)
    ("selfalias.yaml", b"name: x\nsteps: &s\n  a: {python: 'm:f', args: *s}\n",
     ":2: an alias (*name) refers to a mapping or list that contains it"),
    # "billion laughs": nine lines standing for 10**10 values (it ran until memory ran out)
    ("laughs.yaml", b"name: x\nsteps: {}\nl0: &l0 [x, x, x, x, x, x, x, x, x, x]\n"
     + b"".join(f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 10)}]\n".encode()
                for n in range(1, 10)),
     ":3: the file stands for more than 100,000 values once its aliases (*name) are "
     "expanded"),
]


@pytest.mark.parametrize(("name", "content", "message"), BAD, ids=[b[0] for b in BAD])
def test_a_bad_file_is_a_workflow_error_with_its_line(tmp_path: Path, name: str,
                                                      content: bytes, message: str) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(WorkflowError) as caught:
        load_workflow(path)
    assert str(caught.value).startswith(f"{path}{message}")


@pytest.mark.parametrize(("name", "content", "message"), BAD, ids=[b[0] for b in BAD])
def test_the_cli_prints_it_and_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       name: str, content: bytes, message: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / name).write_bytes(content)
    result = CliRunner().invoke(app, ["run", name, "--db", str(tmp_path / "runs.db")])
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        result.exception
    assert result.exit_code == 2, result.output
    assert result.output.startswith(f"error: {name}{message}")
    assert not (tmp_path / "runs.db").exists()


def test_a_folder_named_as_the_file_says_so(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "flows.yaml").mkdir()
    with pytest.raises(WorkflowError, match=r"flows.yaml: is a folder, not a workflow file; "
                                            r"name the .yaml file inside it"):
        load_workflow(tmp_path / "flows.yaml")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["run", "flows.yaml"])
    assert result.exit_code == 2 and "error: flows.yaml: is a folder" in result.output


def test_a_byte_order_mark_is_not_part_of_the_text(tmp_path: Path) -> None:
    path = tmp_path / "bom.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + GOOD.encode())
    assert load_workflow(path).name == "ok"
