"""`looplab new-suite DIR --repo PATH --target TEST`: a suite folder that `looplab run --cases DIR` runs at once.

The folder gets one case (`cases/<id>.toml`, its `repo` relative to the case file), looplab's default
investigator prompt (`system_prompt.txt`, naming the repository's language: `language_of`) and a `tools.py` with no
tools, whose docstring shows how to add one.

It never changes what is there: if anything is already at a path it would write (a file, a FIFO, a link, even one
to nothing), or the folder holds case files, or its `cases` is not a folder of its own (a link), it refuses in one
line and writes nothing. Each file is written under the files rule (`files.write_text`: a temporary file renamed
into place, so a link put there meanwhile is replaced, never written through).
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path, PurePosixPath

from looplab.adapters.contract import files
from looplab.adapters.contract.errors import LooplabError
from looplab.adapters.contract.limits import Limits
from looplab.scenarios.suite import SYSTEM_PROMPT_FILE, TOOLS_FILE, default_system_prompt
from looplab.scenarios.target import target_problem

#: The folder of a suite that holds its case files.
CASES_FOLDER = "cases"

#: The language of a test file, by its suffix.
LANGUAGE_OF_SUFFIX = {
    ".py": "Python",
    ".js": "JavaScript",
    ".mjs": "JavaScript",
    ".cjs": "JavaScript",
    ".jsx": "JavaScript",
    ".ts": "TypeScript",
    ".mts": "TypeScript",
    ".cts": "TypeScript",
    ".tsx": "TypeScript",
    ".rb": "Ruby",
    ".go": "Go",
    ".rs": "Rust",
    ".java": "Java",
    ".kt": "Kotlin",
    ".php": "PHP",
    ".cs": "C#",
    ".swift": "Swift",
    ".ex": "Elixir",
    ".exs": "Elixir",
}
#: The language of a repository whose target names no file of a known language, by a project file at its root.
LANGUAGE_OF_FILE = {
    "tsconfig.json": "TypeScript",
    "package.json": "JavaScript",
    "go.mod": "Go",
    "Cargo.toml": "Rust",
    "pom.xml": "Java",
    "build.gradle": "Java",
    "Gemfile": "Ruby",
    "composer.json": "PHP",
    "mix.exs": "Elixir",
    "pyproject.toml": "Python",
    "setup.py": "Python",
}
#: What looplab's default prompt says of the repository, which a suite's prompt says in the repository's language.
_PROMPT_LANGUAGE = "in a Python repository"

#: A case id: it names the case file too, so it is a plain file name.
_CASE_ID = re.compile(r"[a-z0-9][a-z0-9._-]*", re.IGNORECASE)

_TOOLS_PY = """\
'''This suite's own tools: plain typed Python functions that a case offers by name.

Each function defined here is a tool. Its name is the tool's name, its docstring is the description the
model reads, and its parameters, with their type hints, are the schema of the arguments. A first parameter
annotated `Workspace` receives the run's copy of the repository: `ws.text_file(path)` is a text file in it
(refused, with the reason, outside it or for a secret), `ws.resolve(path)` any path in it. Parameters take
JSON's types (str, int, float, bool, lists and dicts of them, Literal, optional). What it returns is what the
model sees (text as it is, anything else as JSON); an exception it raises reaches the model as an error.

A case offers a tool by listing it, beside the built-in ones it wants:

    tools = ["run_tests", "read_file", "search_code", "count_lines"]

A tool that changes something (writes, deploys, sends) is listed under `effects` too; each call of it then
goes through approval, as write_file does.

For example:

    from looplab.shared_tools import Workspace


    def count_lines(ws: Workspace, path: str) -> str:
        \"\"\"How many lines the file at `path` (relative to the repository root) has.\"\"\"
        return str(len(ws.text_file(path).read_text(encoding="utf-8").splitlines()))
'''
"""


def write_suite(folder: Path, repo: Path, target: str, *, case_id: str | None = None) -> list[Path]:
    """Write a suite folder with one case investigating `target` in `repo`; return the files written.

    `case_id` defaults to one made from the test's name. Refused with a one-line `LooplabError`: a folder that
    already holds a suite, a `repo` that is not a folder, a `target` whose file is not in `repo` or that is no test
    there (`target_problem`, as when a case file is read), a bad `case_id`.
    """
    if not repo.is_dir():
        raise LooplabError(f"--repo {repo}: not a folder")
    _check_target(repo, target)
    ident = case_id if case_id is not None else case_id_of(target)
    if not _CASE_ID.fullmatch(ident):
        raise LooplabError(f"case id {ident!r}: use letters, digits, '-', '_' and '.', starting with a letter or digit")
    if folder.exists() and not folder.is_dir():
        raise LooplabError(f"{folder}: exists and is not a folder")
    cases = folder / CASES_FOLDER
    if cases.is_symlink() or (os.path.lexists(cases) and not cases.is_dir()):
        raise LooplabError(f"{cases}: not a folder of the suite's own (a link or a file); name a new folder")
    case_file = cases / f"{ident}.toml"
    texts = {
        case_file: _case_text(ident, _relative(repo, case_file.parent), target),
        folder / SYSTEM_PROMPT_FILE: _prompt_for(language_of(repo, target)) + "\n",
        folder / TOOLS_FILE: _TOOLS_PY,
    }
    # lexists: a link (to nothing too) or a FIFO at a path counts as there; nothing is written through it.
    existing = sorted(cases.glob("*.toml")) + [p for p in texts if os.path.lexists(p)]
    if existing:
        raise LooplabError(f"{folder}: already holds a suite ({existing[0]}); name a new folder")
    files.make_folder(cases)
    for path, text in texts.items():
        files.write_text(path, text)
    return list(texts)


def language_of(repo: Path, target: str) -> str | None:
    """The language of the repository's tests: the target file's (by its suffix), else the one its project files
    name (`package.json`: JavaScript), else None (unknown)."""
    suffix = PurePosixPath(target.partition("::")[0]).suffix
    if suffix in LANGUAGE_OF_SUFFIX:
        return LANGUAGE_OF_SUFFIX[suffix]
    return next((language for name, language in LANGUAGE_OF_FILE.items() if (repo / name).is_file()), None)


def _prompt_for(language: str | None) -> str:
    """looplab's default investigator prompt, saying the repository's language (or no language when unknown)."""
    said = f"in a {language} repository" if language else "in a repository"
    return default_system_prompt().replace(_PROMPT_LANGUAGE, said)


def case_id_of(target: str) -> str:
    """A case id from a test target: the test's name (or the file's) without `test_`, e.g. `invoice-total`."""
    file, _, test = target.partition("::")
    name = test.rsplit("::", 1)[-1] if test else PurePosixPath(file).name.split(".", 1)[0]
    name = name.split("[", 1)[0]  # a parametrized test's id names the test, not one of its parameters
    words = [w for w in re.split(r"[^a-z0-9]+", name.lower()) if w]
    if len(words) > 1 and words[0] == "test":
        words = words[1:]
    elif len(words) > 1 and words[-1] == "test":
        words = words[:-1]
    return "-".join(words) or "case"


def _check_target(repo: Path, target: str) -> None:
    file = target.partition("::")[0].strip()
    if not file:
        raise LooplabError(f"--target {target!r}: name a test file in the repo, e.g. tests/test_x.py::test_y")
    path = PurePosixPath(file)
    if path.is_absolute() or ".." in path.parts:
        raise LooplabError(f"--target {target!r}: the test file's path is relative to the repo, inside it")
    if not (repo / path).is_file():
        raise LooplabError(f"--target {target!r}: no file {file} in {repo}")
    if problem := target_problem(target, repo):  # what a case file's target is held to when it is read
        raise LooplabError(f"--target {target!r}: {problem}")


def _relative(repo: Path, start: Path) -> str:
    # Relative to the case file, as the case loader reads it; forward slashes, so the file reads the same anywhere.
    return PurePosixPath(Path(os.path.relpath(repo.resolve(), start.resolve()))).as_posix()


def _toml_string(text: str) -> str:
    """A TOML basic string: quotes and backslashes escaped, and every control character."""
    escaped = "".join(
        f"\\{c}" if c in '"\\' else f"\\u{ord(c):04x}" if ord(c) < 0x20 or ord(c) == 0x7F else c for c in text
    )
    return f'"{escaped}"'


def _case_text(ident: str, repo: str, target: str) -> str:
    task = f"The test {target} fails. Find out why and propose the fix."
    max_steps = Limits().max_steps
    return f"""\
# One investigation that every runner runs. Paths are relative to this file.
id = {_toml_string(ident)}
description = {_toml_string(f"Why {target} fails.")}
repo = {_toml_string(repo)}
target = {_toml_string(target)}
task = {_toml_string(task)}

# Optional keys:
# tools = ["run_tests", "read_file", "search_code", "my_tool"]
#                                      # the tools offered: built-in ones and functions of ../{TOOLS_FILE}
#                                      # (default: run_tests, read_file, search_code)
# effects = ["my_tool"]                # its own tools that change something: each call goes through approval
# test_command = ["node", "--test"]    # what run_tests runs, as a list of arguments (default: python -m pytest)
# system_prompt = "..."                # what every runner is told first (default: ../{SYSTEM_PROMPT_FILE})
# allow_writes = true                  # offer write_file too (behind approval)

[limits]
max_steps = {max_steps}
# max_seconds = 300                    # wall-clock budget of the whole run
# max_cost_usd = 0.50                  # dollar budget at the model's price
# max_tokens = 200000                  # token budget: input plus output over every model call

[checks]
stop_reason = "final_answer"
# answer_mentions = ["function_name", "path/to/file.py"]  # words the answer must contain
"""


def main(args: argparse.Namespace) -> int:
    """`looplab new-suite`: write the suite, list its files and say how to run it."""
    folder = Path(args.dir)
    for path in write_suite(folder, Path(args.repo), args.target, case_id=args.case_id):
        print(f"wrote {path}")
    print(f"run it: looplab run --cases {folder}")
    return 0
