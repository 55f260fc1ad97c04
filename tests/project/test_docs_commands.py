"""Every `looplab` command the README and the documentation pages show runs, and succeeds.

Each page's commands run in the order the page shows them, in one fresh folder, so a command that reads what
an earlier one wrote (`merge shard-1.json shard-2.json`, `caps --check` after `caps`) finds it. The folder holds what
the pages' examples name: for each `new-suite --repo R --target T`, a small project at R with a failing test T (a
Python one, or looplab's Node fixture for a `.js` test), looplab's `examples/` and kept measurements (`history/`),
and a results document (or a caps measurement, for `history record --caps`) where a page reads one before it
writes it. `PATH` starts with this interpreter's
folder, as after `. .venv/bin/activate`.

What changes, so that about sixty commands take minutes rather than hours, and no key or provider is needed:

- a command that would run every installed runner runs one (`--runner handrolled`, or `google_adk` for a Gemini
  model), an `eval` without a case runs one case (`--case vip-compound`), and a repetition count is cut to 2;
- a command naming a provider's model (`--model anthropic:...`, `openai:...`) reaches the scripted model standing
  in for the provider (`--base-url` set to it, or put in place of the page's `http://localhost:8000/v1`), with a
  placeholder key (for Gemini, `GOOGLE_API_KEY`);
- `serve-tools` is started, asked for what it prints first (its URL, or over stdio its answer to `initialize`) and
  stopped.

Everything else is the command as the page shows it. The README's cheap commands also run in the fast tier
(`tests/project/test_docs.py`).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from looplab.scenarios.scripted.server import ScriptedModelServer
from tests.project.test_docs import README, REPO, _pages, _shown_commands

pytestmark = pytest.mark.full

#: A command's bound; one that creates runner environments (`--versions`) gets the longer one.
COMMAND_TIMEOUT = 300
ENVIRONMENT_TIMEOUT = 900
#: What `serve-tools` may take to say where it listens.
SERVE_TIMEOUT = 60
#: Commands whose page shows them to make a check fail (exit 1, `docs/exit-codes.md`), and why.
EXPECTED_TO_FAIL_A_CHECK = {
    "looplab run --max-steps 2": "two model calls are fewer than the cases need: the runs stop at the cap",
    "looplab eval --case noisy-model --runner handrolled --runner langgraph --repeat 20": (
        "its model slips at random by design: some runs fail a check"
    ),
}
#: The one runner a command that would run every runner runs, by the model's provider (Gemini's API: not handrolled).
ONE_RUNNER = {"google": "google_adk"}
#: Commands that run runners and take `--runner`.
RUNS_RUNNERS = {"run", "eval", "caps", "bench", "scorecard"}
LOCAL_SERVER = "http://localhost:8000/v1"
NODE_PROJECT = REPO / "tests" / "fixtures" / "node_project"
#: The results document a page may read before it writes one.
READS = re.compile(r"(?:--results|--resume|report|merge)\s+(\S+\.json)")
#: The caps measurement a page may read before it writes one (`history record --caps`).
READS_CAPS = re.compile(r"--caps\s+(\S+\.json)")
WRITES = re.compile(r"(?:--json|-o)\s+(\S+\.json)")
MEASURES = re.compile(r"--measured\s+(\S+\.json)")


def _narrowed(words: list[str], server: ScriptedModelServer) -> list[str]:
    """The command's arguments with the changes the module docstring lists."""
    words = list(words)
    command = words[0]
    provider = words[words.index("--model") + 1].partition(":")[0] if "--model" in words else "scripted"
    if command in RUNS_RUNNERS and "--runner" not in words:
        words += ["--runner", ONE_RUNNER.get(provider, "handrolled")]
    if command == "eval" and "--case" not in words and "--cases" not in words:
        words += ["--case", "vip-compound"]
    if "--repeat" in words:
        words[words.index("--repeat") + 1] = "2"
    elif command == "bench":
        words += ["--repeat", "2"]
    if "--model" in words:
        url = server.base_urls[provider]
        if "--base-url" in words:
            at = words.index("--base-url") + 1
            assert words[at] == LOCAL_SERVER, f"a base URL the test does not know: {words[at]}"
            words[at] = url
        else:
            words += ["--base-url", url]
    return words


def _folder(tmp_path: Path, page: Path, commands: list[str]) -> Path:
    """A fresh folder for the page's commands, holding what they name (see the module docstring)."""
    here = tmp_path / "work"
    here.mkdir()
    shutil.copytree(REPO / "examples", here / "examples")
    shutil.copytree(REPO / "history", here / "history")  # the kept measurements, as in a checkout
    for command in commands:
        words = shlex.split(command)[1:]
        if words[0] == "new-suite":
            target = words[words.index("--target") + 1]
            _project(here / words[words.index("--repo") + 1], target)
    written: set[str] = set()
    for command in commands:
        for name in READS.findall(command):
            if name not in written and not (here / name).exists():
                _seed_results(here / name)
        for name in READS_CAPS.findall(command):
            if name not in written and not (here / name).exists():
                _seed_caps(here / name)
        written.update(WRITES.findall(command) + MEASURES.findall(command))
    return here


def _project(root: Path, target: str) -> None:
    """A project at `root` whose test `target` fails: looplab's Node fixture for a `.js` test, else a Python one."""
    file, _, test = target.partition("::")
    if file.endswith(".js"):
        shutil.copytree(NODE_PROJECT, root)
        assert (root / file).is_file(), f"the Node fixture has no {file}"
        return
    files = {
        "shop/__init__.py": "",
        "shop/prices.py": "def total(cents: int, percent_off: int) -> int:\n"
        "    off = cents * percent_off // 100\n"
        "    return cents - off - off\n",
        file: f"from shop.prices import total\n\n\ndef {test or 'test_total'}():\n    assert total(2000, 10) == 1800\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")


def _seed_results(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    done = _looplab(["eval", "--runner", "handrolled", "--case", "vip-compound", "--json", str(path)], path.parent)
    assert done.returncode == 0, done.stderr[-2000:]


def _seed_caps(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    done = _looplab(["caps", "--runner", "handrolled", "--measured", str(path)], path.parent)
    assert done.returncode == 0, done.stderr[-2000:]


def _environment() -> dict[str, str]:
    keys = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GOOGLE_API_KEY", "GEMINI_API_KEY")
    env = {k: v for k, v in os.environ.items() if k not in keys}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(dict.fromkeys(keys[:3], "placeholder-key"), COLUMNS="100")
    return env


def _looplab(args: list[str], cwd: Path, timeout: float = COMMAND_TIMEOUT) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "looplab", *args]
    return subprocess.run(
        argv, cwd=cwd, env=_environment(), capture_output=True, text=True, timeout=timeout, check=False
    )


def _serve_tools(args: list[str], cwd: Path) -> str:
    """Start `serve-tools`, read what it says first, stop it; its first line (over stdio: the initialize reply)."""
    stdio = "--stdio" in args
    proc = subprocess.Popen(
        [sys.executable, "-m", "looplab", *args],
        cwd=cwd,
        env=_environment(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        if stdio:
            client = {"name": "docs", "version": "1"}
            hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client}
            proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}) + "\n")
            proc.stdin.flush()
        first = _first_line(proc)
    finally:
        if stdio:
            proc.stdin.close()  # the client closing the pipe ends the server
        else:
            proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=SERVE_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=SERVE_TIMEOUT)
    assert proc.returncode in (0, 130), f"serve-tools exited {proc.returncode}: {proc.stderr.read()[-2000:]}"  # type: ignore[union-attr]
    return first


def _first_line(proc: subprocess.Popen[str]) -> str:
    """The process's first line of output, waiting at most SERVE_TIMEOUT."""
    import selectors

    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)  # type: ignore[arg-type]
        if not selector.select(SERVE_TIMEOUT):
            pytest.fail(f"serve-tools said nothing in {SERVE_TIMEOUT} s")
    return proc.stdout.readline()  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as running:
        yield running


def _pages_with_commands() -> list[Path]:
    return [page for page in _pages() if _shown_commands(page)]


@pytest.mark.parametrize("page", _pages_with_commands(), ids=lambda page: str(page.relative_to(REPO)))
def test_every_command_a_page_shows_runs(page: Path, server: ScriptedModelServer, tmp_path: Path) -> None:
    commands = _shown_commands(page)
    here = _folder(tmp_path, page, commands)
    for command in commands:
        words = _narrowed(shlex.split(command)[1:], server)
        if words[0] == "serve-tools":
            first = _serve_tools(words, here)
            expected = '"jsonrpc"' if "--stdio" in words else "http://127.0.0.1"
            assert expected in first, f"{page.name}: `{command}` first said {first!r}"
            continue
        timeout = ENVIRONMENT_TIMEOUT if "--versions" in words else COMMAND_TIMEOUT
        done = _looplab(words, here, timeout)
        shown = f"{page.relative_to(REPO)}: `{command}` (run as `looplab {shlex.join(words)}`)"
        expected = 1 if command in EXPECTED_TO_FAIL_A_CHECK else 0
        assert done.returncode == expected, (
            f"{shown} exited {done.returncode}, not {expected}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
        assert done.stdout.strip() or done.stderr.strip(), f"{shown} printed nothing"


def test_the_readme_is_among_the_pages_run() -> None:
    assert README in _pages_with_commands()
