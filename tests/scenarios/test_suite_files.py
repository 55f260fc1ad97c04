"""A suite folder is read like every other file: each of its files under the files rule (a regular file, never
blocking, a bound of bytes each), TOML nesting bounded before it is parsed, `new-suite` never writing through a
link, a listing that runs none of `tools.py`, and `serve-tools --stdio` whose stdout is the protocol's alone.

Every refusal is one line naming the file. A FIFO is opened in-process only under `_within` (a bound, and the
FIFO released if a regression blocks on it); a link to `/dev/zero` is read only in a subprocess with a memory
bound and a timeout.
"""

from __future__ import annotations

import inspect
import json
import keyword
import os
import resource
import select
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from looplab.adapters.contract.errors import LooplabError
from looplab.cli import main
from looplab.cli.sources import MAX_PROJECT_BYTES, PROJECT_FILE, project
from looplab.cli.suite import write_suite
from looplab.scenarios import strict
from looplab.scenarios.cases import MAX_CASE_BYTES, load_case, load_cases
from looplab.scenarios.suite import (
    MAX_PROMPT_BYTES,
    MAX_SUITE_TOML_BYTES,
    MAX_TOOLS_BYTES,
    suite_at,
    tool_names_in,
)
from tests.paths import REPO

CASE = 'id = "own"\nrepo = "../repo"\ntarget = "t.py"\ntask = "Why."\n'
#: Each file of a suite folder, by its path in the suite, with the bound looplab reads of it.
SUITE_FILES = {
    "cases/own.toml": MAX_CASE_BYTES,
    "system_prompt.txt": MAX_PROMPT_BYTES,
    "suite.toml": MAX_SUITE_TOML_BYTES,
    "tools.py": MAX_TOOLS_BYTES,
}
#: A tools.py whose import leaves a mark (the file `imported` beside it) and prints.
MARKING_TOOLS = (
    "from pathlib import Path\n\n"
    "Path(__file__).with_name('imported').write_text('yes')\n"
    "print('tools.py says hello at import')\n\n\n"
    "def shelf_count(sku: str) -> str:\n"
    '    """Units of a product on the shelf."""\n'
    "    print('shelf_count says hello')\n"
    "    return '4'\n"
)
ROOT = REPO


def _suite(root: Path, case: str = CASE, **files: str) -> Path:
    """A new suite folder under `root` (a fresh one each call) with one case and `files` by name."""
    suite = Path(tempfile.mkdtemp(dir=root)) / "suite"
    (suite / "cases").mkdir(parents=True)
    (suite / "repo").mkdir()
    (suite / "cases" / "own.toml").write_text(case, encoding="utf-8")
    for name, text in files.items():
        (suite / name).write_text(text, encoding="utf-8")
    return suite


def _within(seconds: float, fn: Callable[[], Any], fifo: Path | None = None) -> Any:
    """`fn()`, failing the test if it takes over `seconds`; a reader stuck opening `fifo` is released first."""
    box: dict[str, Any] = {}

    def call() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the test's thread
            box["error"] = exc

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        if fifo is not None:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # a writer lets the blocked open through
        thread.join(5)
        pytest.fail(f"still running after {seconds} s (blocked on {fifo})")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _refusal(fn: Callable[[], Any], fifo: Path | None = None) -> str:
    """The one-line `LooplabError` `fn()` raises within 5 s."""
    with pytest.raises(LooplabError) as info:
        _within(5, fn, fifo)
    message = str(info.value)
    assert "\n" not in message
    return message


def _make(kind: str, path: Path) -> None:
    path.unlink(missing_ok=True)
    if kind == "FIFO":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "link to nothing":
        path.symlink_to(path.with_name("nothing-here"))


def _cli(*args: str, cwd: Path | None = None, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """`looplab ARGS` in a subprocess with a 2 GiB address space and a timeout: a regression fails, never hangs."""

    def bound_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    return subprocess.run(
        [sys.executable, "-m", "looplab", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd or ROOT,
        preexec_fn=bound_memory,
    )


# --- 1. every suite file under the files rule ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["FIFO", "folder", "link to nothing"])
@pytest.mark.parametrize("name", list(SUITE_FILES))
def test_a_suite_file_that_is_not_a_regular_file_is_one_line_at_once(name: str, kind: str, tmp_path: Path) -> None:
    suite = _suite(tmp_path, **{"tools.py": "", "suite.toml": "", "system_prompt.txt": "Hi."})
    _make(kind, suite / name)
    message = _refusal(lambda: load_cases([suite], import_tools=False), suite / name if kind == "FIFO" else None)
    assert str(suite / name) in message
    expected = {"FIFO": "a FIFO, not a regular file", "folder": "a folder, not a regular file"}
    assert expected.get(kind, "no such file") in message


@pytest.mark.parametrize("name", list(SUITE_FILES))
def test_a_suite_file_over_its_bound_is_refused_before_it_is_read(name: str, tmp_path: Path) -> None:
    suite = _suite(tmp_path)
    bound = SUITE_FILES[name]
    with open(suite / name, "ab") as sparse:  # a hole of bound + 1 bytes: nothing is written, nothing need be read
        sparse.truncate(bound + 1)
    message = _refusal(lambda: load_cases([suite], import_tools=False))
    assert f"{suite / name}: {bound + 1:,} bytes, over the {bound:,} looplab reads" in message


def test_looplab_toml_is_read_under_the_rule_and_its_bound(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / PROJECT_FILE)
    assert "looplab.toml: a FIFO, not a regular file" in _refusal(lambda: project(tmp_path), tmp_path / PROJECT_FILE)
    (tmp_path / PROJECT_FILE).unlink()
    with open(tmp_path / PROJECT_FILE, "ab") as sparse:
        sparse.truncate(MAX_PROJECT_BYTES + 1)
    assert f"over the {MAX_PROJECT_BYTES:,} looplab reads" in _refusal(lambda: project(tmp_path))


@pytest.mark.parametrize("name", list(SUITE_FILES))
def test_looplab_cases_refuses_a_suite_file_linked_to_dev_zero_in_one_line(name: str, tmp_path: Path) -> None:
    suite = _suite(tmp_path)
    (suite / name).unlink(missing_ok=True)
    (suite / name).symlink_to("/dev/zero")
    done = _cli("cases", "--cases", str(suite))
    assert (done.returncode, done.stdout) == (2, "")
    refusal = f"{suite / name}: a character device, not a regular file: looplab reads only regular files"
    through = "" if name == "cases/own.toml" else f"{suite / 'cases' / 'own.toml'}: its suite cannot load: "
    assert done.stderr == f"looplab: {through}{refusal}\n"


def test_looplab_cases_does_not_wait_on_a_fifo_among_the_case_files(tmp_path: Path) -> None:
    suite = _suite(tmp_path)
    os.mkfifo(suite / "cases" / "x.toml")
    done = _cli("cases", "--cases", str(suite))
    refusal = f"{suite / 'cases' / 'x.toml'}: a FIFO, not a regular file: looplab reads only regular files"
    assert (done.returncode, done.stderr) == (2, f"looplab: {refusal}\n")


def test_tools_py_is_read_not_run_until_its_tools_are_asked_for(tmp_path: Path) -> None:
    suite = suite_at(_suite(tmp_path, **{"tools.py": MARKING_TOOLS}))
    assert suite.tool_names == ("shelf_count",)
    assert not (suite.folder / "imported").exists()  # read under the rule, its names from the source
    assert list(suite.functions) == ["shelf_count"]
    assert (suite.folder / "imported").read_text() == "yes"


# --- 2. TOML nesting bounded before parsing -----------------------------------------------------------------------

BOMBS = {
    "arrays": lambda n: "a = " + "[" * n + "]" * n,
    "inline tables": lambda n: "a = " + "{ b = " * n + "1" + " }" * n,
    "dotted key": lambda n: ".".join(["k"] * n) + " = 1",
    "table header": lambda n: "[" + ".".join(["t"] * n) + "]",
    "array of tables": lambda n: "[[" + ".".join(["t"] * n) + "]]",
}
#: Where a TOML file of a suite (or the project) sits, and how it is read.
TOML_FILES: dict[str, Callable[[Path, str], Any]] = {
    "case file": lambda root, text: load_case(_suite(root, case=text) / "cases" / "own.toml"),
    "suite.toml": lambda root, text: suite_at(_suite(root, **{"suite.toml": text})),
    "looplab.toml": lambda root, text: (
        (folder := Path(tempfile.mkdtemp(dir=root))).joinpath(PROJECT_FILE).write_text(text),
        project(folder),
    ),
}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    bomb=st.sampled_from(list(BOMBS)),
    where=st.sampled_from(list(TOML_FILES)),
    depth=st.one_of(st.integers(strict.MAX_TOML_DEPTH + 1, 200), st.integers(200, 100_000)),
)
def test_a_toml_file_nested_too_deep_is_one_line_fast(bomb: str, where: str, depth: int, tmp_path: Path) -> None:
    bound = {"case file": MAX_CASE_BYTES, "suite.toml": MAX_SUITE_TOML_BYTES, "looplab.toml": MAX_PROJECT_BYTES}
    while len(text := BOMBS[bomb](depth)) > bound[where]:  # a file over its bound is refused for its size first
        depth = depth * 9 // 10
    started = time.monotonic()
    with pytest.raises(LooplabError) as info:
        TOML_FILES[where](tmp_path, text)
    assert time.monotonic() - started < 1.0
    message = str(info.value)
    assert "\n" not in message
    assert f"line 1: nested more than {strict.MAX_TOML_DEPTH} levels deep" in message


def test_the_named_bombs_are_refused_in_a_fraction_of_a_second(tmp_path: Path) -> None:
    for text in (BOMBS["arrays"](100_000), BOMBS["inline tables"](50_000), BOMBS["dotted key"](50_000)):
        started = time.monotonic()
        message = _refusal(lambda text=text: TOML_FILES["case file"](tmp_path, text))
        assert time.monotonic() - started < 1.0
        # 50,000 inline tables take 400 KB: over a case file's bound before their depth is looked at.
        assert "cases/own.toml: line 1: nested more than 32 levels deep" in message or (
            f"cases/own.toml: {len(text.encode()):,} bytes, over the {MAX_CASE_BYTES:,} looplab reads" in message
        )


def test_nesting_at_the_bound_is_read(tmp_path: Path) -> None:
    for bomb in BOMBS:
        # `a = [[...]]` with n brackets reaches n + 1 levels (a, then each array), as do n inline tables and
        # n-part [[array of tables]] (its items one level below); a dotted key or a [table] of n parts, n.
        n = strict.MAX_TOML_DEPTH - (bomb in ("arrays", "inline tables", "array of tables"))
        assert strict.toml_too_deep(BOMBS[bomb](n)) is None, bomb
        assert strict.toml_too_deep(BOMBS[bomb](n + 1)) is not None, bomb
        strict.parse_toml(BOMBS[bomb](n), tmp_path / "x.toml")


# A TOML document rendered in many of the ways TOML allows, to check the scan against the data's own depth.
_BARE = st.from_regex(r"[A-Za-z0-9_-]{1,5}", fullmatch=True)
_CHARS = st.sampled_from(list("ab.[]{}#=\"'\\ ,\n\t"))
_KEYS = st.one_of(_BARE, st.text(_CHARS, max_size=5))
_SCALARS = st.one_of(
    st.integers(-(10**6), 10**6), st.booleans(), st.floats(allow_nan=False, allow_infinity=False), st.text(_CHARS)
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_KEYS, inner, max_size=3)),
    max_leaves=12,
)


def _depth(value: Any, level: int) -> int:
    """How deep `value`, sitting at `level`, reaches: each key and each array or table one level."""
    if isinstance(value, list | dict):
        inner = value.values() if isinstance(value, dict) else value
        return max([level + 1, *(_depth(v, level + 1) for v in inner)])
    return level


def _key(key: str) -> str:
    bare = key and all(c.isascii() and (c.isalnum() or c in "_-") for c in key)
    return key if bare else json.dumps(key)


def _string(text: str, draw: Callable[[Any], Any]) -> str:
    forms = ["basic"]
    if "'" not in text and "\n" not in text:
        forms.append("literal")
    if "'''" not in text and not text.startswith("\n"):
        forms.append("multi-line literal")
    forms.append("multi-line basic")
    form = draw(st.sampled_from(forms))
    if form == "literal":
        return f"'{text}'"
    if form == "multi-line literal":
        return f"'''{text}'''"
    if form == "multi-line basic":
        body = text.replace("\\", "\\\\").replace('"', '\\"').replace("\t", "\\t")
        return '"""' + ("\\n" + body[1:] if body.startswith("\n") else body) + '"""'
    return json.dumps(text)


def _inline(value: Any, draw: Callable[[Any], Any]) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)  # finite: NaN is no value a parse gives back equal
    if isinstance(value, str):
        return _string(value, draw)
    if isinstance(value, list):
        gap = draw(st.sampled_from([", ", ",\n  ", ", # a comment [ { ]\n  "]))
        return "[" + gap.join(_inline(v, draw) for v in value) + "]"
    return "{" + ", ".join(_pair(k, v, draw) for k, v in value.items()) + "}"


def _pair(key: str, value: Any, draw: Callable[[Any], Any]) -> str:
    """`key = value`, as a dotted key where the value is a table of one entry and the draw says so."""
    if isinstance(value, dict) and len(value) == 1 and draw(st.booleans()):
        [(inner, inner_value)] = value.items()
        return f"{_key(key)}.{_pair(inner, inner_value, draw)}"
    return f"{_key(key)} = {_inline(value, draw)}"


def _document(table: dict[str, Any], path: list[str], draw: Callable[[Any], Any]) -> list[str]:
    """The lines of `table` at `path`: its key = value lines, then its [tables] and [[arrays of tables]]."""
    lines, later = [], []
    for key, value in table.items():
        section = isinstance(value, dict) and value and draw(st.booleans())
        tables = isinstance(value, list) and value and all(isinstance(v, dict) and v for v in value)
        if section:
            later.append(["[" + ".".join(map(_key, [*path, key])) + "]  # [x]", *_document(value, [*path, key], draw)])
        elif tables and draw(st.booleans()):
            header = "[[" + ".".join(map(_key, [*path, key])) + "]]"
            later.extend([header, *(_pair(k, v, draw) for k, v in item.items())] for item in value)
        else:
            lines.append(_pair(key, value, draw))
    return lines + [line for block in later for line in block]


@settings(max_examples=200, deadline=None)
@given(document=st.dictionaries(_KEYS, _VALUES, max_size=4), limit=st.integers(1, 6), data=st.data())
def test_the_nesting_scan_agrees_with_the_parsed_data(
    document: dict[str, Any], limit: int, data: st.DataObject
) -> None:
    text = "\n".join(_document(document, [], data.draw)) + "\n"
    assert strict.parse_toml(text, Path("generated.toml")) == document  # the rendering is the document
    deepest = max([0, *(_depth(v, 1) for v in document.values())])
    assert (strict.toml_too_deep(text, limit) is None) == (deepest <= limit), text


# --- 3. new-suite never writes through a link ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["link to nothing", "link to a file", "FIFO"])
@pytest.mark.parametrize("name", ["system_prompt.txt", "tools.py", "cases/t.toml"])
def test_new_suite_refuses_anything_at_a_path_it_writes_and_writes_nothing(
    name: str, kind: str, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "t.py").write_text("")
    folder = tmp_path / "s"
    (folder / "cases").mkdir(parents=True)
    target = tmp_path / "elsewhere.txt"
    if kind == "FIFO":
        os.mkfifo(folder / name)
    else:
        if kind == "link to a file":
            target.write_text("keep me")
        (folder / name).symlink_to(target)
    message = _refusal(lambda: write_suite(folder, repo, "t.py"), folder / name if kind == "FIFO" else None)
    assert "already holds a suite" in message and str(folder / name) in message
    assert target.read_text() == "keep me" if kind == "link to a file" else not target.exists()
    assert sorted(p.name for p in folder.rglob("*")) == sorted(["cases", Path(name).name])


def test_new_suite_refuses_a_cases_folder_that_is_a_link(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "t.py").write_text("")
    (tmp_path / "s").mkdir()
    (tmp_path / "other").mkdir()
    (tmp_path / "s" / "cases").symlink_to(tmp_path / "other")
    assert "s/cases: not a folder of the suite's own" in _refusal(lambda: write_suite(tmp_path / "s", repo, "t.py"))
    assert list((tmp_path / "other").iterdir()) == [] and list((tmp_path / "s").iterdir()) == [tmp_path / "s" / "cases"]


# --- 4. a listing reads tools.py and runs none of it --------------------------------------------------------------


def test_looplab_cases_lists_a_suites_own_tools_without_importing_tools_py(tmp_path: Path, capsys) -> None:
    case = CASE + 'tools = ["read_file", "shelf_count"]\n'
    suite = _suite(tmp_path, case=case, **{"tools.py": MARKING_TOOLS})
    assert main(["cases", "--cases", str(suite)]) == 0
    out = capsys.readouterr().out
    assert "shelf_count" in out and "says hello" not in out
    assert not (suite / "imported").exists()


def test_a_listing_checks_the_tools_a_case_names_against_the_source(tmp_path: Path) -> None:
    raising = "raise RuntimeError('never run by a listing')\n\n\ndef shelf_count(sku: str) -> str:\n    return sku\n"
    suite = _suite(tmp_path, case=CASE + 'tools = ["shelf_cont"]\n', **{"tools.py": raising})
    message = _refusal(lambda: load_cases([suite], import_tools=False))
    assert "tools: no tool named 'shelf_cont'; did you mean shelf_count?" in message
    assert "its suite's tools.py defines shelf_count" in message
    good = _suite(tmp_path, case=CASE + 'tools = ["shelf_count"]\n', **{"tools.py": raising})
    assert load_cases([good], import_tools=False)["own"].own_tools == ["shelf_count"]
    # What a run loads imports it: the error is the import's, before anything runs.
    assert "importing it failed: RuntimeError: never run by a listing" in _refusal(lambda: load_cases([good]))


def test_a_tools_py_that_is_not_python_is_one_line_with_its_line_when_listed(tmp_path: Path) -> None:
    suite = _suite(tmp_path, **{"tools.py": "def ok() -> str:\n    return ''\n\ndef broken(:\n"})
    assert f"{suite / 'tools.py'} (line 4): not valid Python" in _refusal(
        lambda: load_cases([suite], import_tools=False)
    )


#: Identifiers: a keyword (`in`, `if`) is no name a function can have.
_NAMES = st.from_regex(r"_?[a-z][a-z0-9_]{0,6}", fullmatch=True).filter(lambda n: not keyword.iskeyword(n))
_STATEMENTS = {
    "def": "def {name}(x: str) -> str:\n    return x\n",
    "async def": "async def {name}(x: str) -> str:\n    return x\n",
    "class": "class {name}:\n    def method(self) -> None:\n        pass\n",
    "assignment": "{name} = 3\n",
    "import": "from os.path import join as {name}\n",
    "nested": "def outer_{name}() -> None:\n    def {name}() -> None:\n        pass\n",
}


@settings(max_examples=100, deadline=None)
@given(statements=st.lists(st.tuples(st.sampled_from(list(_STATEMENTS)), _NAMES), max_size=6, unique_by=lambda s: s[1]))
def test_the_tool_names_read_from_source_are_the_functions_an_import_finds(statements: list[tuple[str, str]]) -> None:
    source = "\n\n".join(_STATEMENTS[kind].format(name=name) for kind, name in statements)
    names = tool_names_in(source)
    expected = [n for kind, n in statements if kind in ("def", "async def") and not n.startswith("_")]
    expected += [f"outer_{n}" for kind, n in statements if kind == "nested"]
    assert names == [n for n in names if n in expected] and sorted(names) == sorted(expected)
    # What importing finds (the tool host's rule): public functions whose module is tools.py itself.
    module: dict[str, Any] = {"__name__": "tools"}
    exec(compile(source, "tools.py", "exec"), module)  # noqa: S102 - the test's own generated source
    found = [k for k, v in module.items() if inspect.isfunction(v) and v.__module__ == "tools" and k[0] != "_"]
    assert names == found


# --- 5. serve-tools --stdio: stdout is the protocol's alone -------------------------------------------------------


def _line(stream: Any, seconds: float) -> str:
    assert select.select([stream], [], [], seconds)[0], f"nothing on stdout within {seconds} s"
    return stream.readline()


def test_serve_tools_over_stdio_keeps_a_teams_prints_off_the_protocol(tmp_path: Path) -> None:
    pytest.importorskip("mcp", reason="the tool server needs the `mcp` extra")
    case = CASE + 'tools = ["read_file", "shelf_count"]\n'
    suite = _suite(tmp_path, case=case, **{"tools.py": MARKING_TOOLS})
    command = [sys.executable, "-m", "looplab", "serve-tools", "--cases", str(suite), "--stdio"]
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None

    def send(message: dict[str, Any]) -> None:
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]

    try:
        info = {"name": "test", "version": "1"}
        send(
            {
                "id": 1,
                "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": info},
            }
        )
        first = json.loads(_line(proc.stdout, 30))
        assert first["id"] == 1 and "serverInfo" in first["result"]
        send({"method": "notifications/initialized"})
        send({"id": 2, "method": "tools/call", "params": {"name": "shelf_count", "arguments": {"sku": "A1"}}})
        second = json.loads(_line(proc.stdout, 30))
        assert second["id"] == 2 and second["result"]["content"][0]["text"] == "4"
        rest, err = proc.communicate(timeout=15)  # closes stdin: the client leaves
    finally:
        proc.kill()
    assert rest == ""  # nothing but the two replies ever reached stdout
    assert "tools.py says hello at import" in err and "shelf_count says hello" in err
