"""A runner's declaration: what it is, what it needs, which knobs cap its loop and their defaults."""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import inspect
import re
import sys
from abc import ABC, abstractmethod
from typing import Any

from pydantic import BaseModel

from looplab.adapters.contract.bare import BareRun
from looplab.adapters.contract.errors import LooplabError
from looplab.adapters.contract.limits import Limits
from looplab.adapters.contract.model import PROVIDER_OF_API, Api, ModelSpec, check_api
from looplab.adapters.contract.result import NativeCap

__all__ = ["KnobDefault", "Probe", "RunnerDeclaration", "installed_version", "read_default", "signature_default"]

#: A cap block in a runner's source: `# cap:begin` ... `# cap:end` (`//` in a JavaScript program).
CAP_BLOCK = re.compile(r"^[ \t]*(?:#|//) cap:begin\n(.*?)^[ \t]*(?:#|//) cap:end", re.S | re.M)


class KnobDefault(BaseModel):
    """A knob's default value (None: no limit) and where in the installed library it was read."""

    value: int | None
    source: str


def read_default(*candidates: tuple[str, str]) -> KnobDefault:
    """The first `(module, attribute)` that exists, as a default; older releases keep it elsewhere."""
    for module, attribute in candidates:
        try:
            value = getattr(importlib.import_module(module), attribute)
        except (ImportError, AttributeError):
            continue
        return KnobDefault(value=None if value is None else int(value), source=f"{module}.{attribute}")
    raise LooplabError(f"default not found in the installed library: {candidates}")


def signature_default(func: Any, param: str) -> KnobDefault:
    """`param`'s default in `func`'s signature (a class: its constructor's), read from the installed library.

    A default that is not an int (None, or a sentinel such as the Anthropic SDK's `omit`) means "unset": no
    limit from that knob.
    """
    default = inspect.signature(func).parameters[param].default
    value = default if isinstance(default, int) and not isinstance(default, bool) else None
    # A sentinel's repr carries a memory address: name its type instead, so the caps doc is stable.
    shown = repr(default) if default is None or value is not None else type(default).__name__
    return KnobDefault(value=value, source=f"{func.__module__}.{func.__qualname__}({param}={shown}) signature")


class Probe(BaseModel):
    """A native cap to set instead of the mapping from `max_steps` (`value=None`: leave it unset).

    `child_default`: set it on the run's agent only, and leave every agent it delegates to at the framework's own
    default (how a team that caps its top agent and not the agents below it runs). `ending_tool`: the name of one of
    the run's tools for the runner to mark as ending the run with its result, the framework's own way
    (`RunnerDeclaration.ending_tool`: LangChain's `return_direct`)."""

    knob: str
    value: int | None
    child_default: bool = False
    ending_tool: str | None = None
    #: The framework's own dollar budget for the run, where it has one (`RunnerDeclaration.cost_knob`); None: unset.
    budget_usd: float | None = None


@functools.cache
def installed_version(distribution: str) -> str:
    """A distribution's installed version, looked up once per process (a lookup scans site-packages)."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


class RunnerDeclaration(ABC):
    """What looplab knows about a runner, declared once, on it: the declaration and the policy read from it.

    The declaration is the class attributes below, written as literals in the runner's class (or a base it
    shares with other runners). Those known before its module is imported (the fields of
    `contract.declaration.Declaration`, whose defaults are the values written here) are read from the source
    without importing the framework: by the registry, `looplab runners`, the noxfile's version sessions and the CI
    matrix. The caps doc reads `cap_code()`, the bench `bare_loop()`. `Runner` (in `looplab.adapters.session`)
    adds the loop; a runner module subclasses that and exports its runner as `RUNNER`.
    """

    #: Runner name, as the CLI spells it.
    name: str
    #: One line: the framework and the knob, as `looplab runners` lists it.
    summary: str = ""
    #: The pip extra that installs its framework (named when it is missing).
    extra: str
    #: Every extra its loops can use (e.g. both provider SDKs), which a version session installs; () = `extra`.
    extras: tuple[str, ...] = ()
    #: The distribution whose version is reported as `runner_version`.
    distribution: str
    #: Modules whose presence means its framework is installed (looked up without importing them).
    requires: tuple[str, ...] = ()
    #: Wire APIs the runner speaks, its default first (`PROVIDER_OF_API` says whose each one is).
    apis: tuple[Api, ...] = ("chat",)
    #: The native caps it can set: the first is where `max_steps` maps; the rest are the framework's
    #: alternatives, which `looplab caps` measures the same way.
    knobs: tuple[str, ...] = ()
    #: Its framework's own run-wide token budget, as a knob `looplab caps` measures (`Probe(knob=token_knob,
    #: value=tokens)`) and `knob_defaults` names the default of; None: it has none. `max_tokens` is looplab's gate.
    token_knob: str | None = None
    #: How its framework marks a tool whose result ends the run as its answer (`StructuredTool(return_direct=True)`),
    #: which `looplab caps` measures at the cap's last call (`Probe.ending_tool`); None: it has no such mark.
    ending_tool: str | None = None
    #: Its framework's own dollar budget for a run (`ClaudeAgentOptions(max_budget_usd=)`), priced by the framework,
    #: which `looplab caps` measures (`Probe.budget_usd`); None: it has none. `max_cost_usd` is looplab's gate.
    cost_knob: str | None = None
    #: Whether its loop runs in another process (it reaches the tools over MCP whatever `run` is told).
    out_of_process: bool = False
    #: Programs it runs, which pip cannot install (e.g. `node`): looked up on PATH.
    commands: tuple[str, ...] = ()
    #: What to install besides the extra, in words.
    programs: str = ""
    #: Whether it runs when no runner is named (`external` needs a command first).
    by_default: bool = True
    #: Whether its framework installs beside the others (`looplab[all]`); one that cannot (its pins conflict
    #: with another framework's) runs in a runner environment of its own (`--isolate`).
    in_all: bool = True
    #: Whether its loop lets the model name one tool a reply (a text protocol), so parallel calls arrive one a step.
    one_tool_a_reply: bool = False
    #: Whether its loop asks for streamed replies (True) or whole ones (False), its default first; a runner with
    #: both takes either (`ModelSpec.stream`, `--stream on|off`).
    streams: tuple[bool, ...] = (False,)
    #: How its framework hands work to another agent, in words (`agent delegation through a tool, usage shared`);
    #: None: it cannot, and a case with a `[delegate]` is not run through it.
    delegation: str | None = None
    #: The delegation shapes (`contract.agents.SHAPES`) it cannot express, each with why in one line; a case of
    #: such a shape is not run through it, and the scorecard says why.
    delegation_gaps: dict[str, str] = {}  # noqa: RUF012 - a literal read from the source, never mutated
    #: The delegation shapes whose outcome its framework leaves to thread timing, each with what was measured: a
    #: run of one may end one way or another, so its caps rows are compared by how they ended, not by their counts.
    delegation_races: dict[str, str] = {}  # noqa: RUF012 - a literal read from the source, never mutated
    #: npm packages its program needs, each with the oldest release its `oldest` version session installs.
    npm_packages: dict[str, str] = {}  # noqa: RUF012 - a literal read from the source, never mutated
    #: The npm release lines its program supports, each tested by a `latest-<line>` version session: the line's name,
    #: the oldest Node.js major it needs, and the npm specs that pick the newest releases of that line
    #: (`{"ai7": (22, {"ai": "7"})}`).
    npm_lines: dict[str, tuple[int, dict[str, str]]] = {}  # noqa: RUF012 - a literal read from the source, never mutated
    #: Pins an `oldest` version session needs beyond the extra's own lower bounds (a companion the bounds allow
    #: in a release too new for the framework's oldest).
    oldest_companions: tuple[str, ...] = ()
    #: Where it comes in listings, reports and the caps doc, lowest first (the hand-rolled baseline is 0).
    listed: int = 1000
    #: The language of the code `cap_code()` shows: the adapter's, or its program's.
    cap_language: str = "python"

    def cap_source(self) -> str:
        """The source the cap is set in: the runner's module (a runner with a program: the program)."""
        return inspect.getsource(sys.modules[type(self).__module__])

    def cap_code(self) -> str:
        """The lines that set the cap, between `cap:begin` and `cap:end` comment markers, as the caps doc shows them."""
        blocks = CAP_BLOCK.findall(self.cap_source())
        return "\n\n".join(inspect.cleandoc("\n" + b) if b.startswith(" ") else b.rstrip() for b in blocks)

    def bare_loop(self) -> BareRun | None:
        """The runner's bare loop (`contract.bare`), which `looplab bench` times beside it; None: it has none."""
        return None

    def knob_defaults(self) -> dict[str, KnobDefault]:
        """Each knob's default, read from the installed library at run time."""
        return {}

    def stream_for(self, model: ModelSpec) -> bool:
        """Whether its loop streams for `model`: `model.stream` if given (a mode it cannot run is refused in one
        line), else its default."""
        if model.stream is None:
            return self.streams[0]
        if model.stream not in self.streams:
            how = "streams every reply" if self.streams == (True,) else "takes every reply whole"
            raise LooplabError(f"runner {self.name!r} cannot run with --stream {_on_off(model.stream)}: its loop {how}")
        return model.stream

    def api_for(self, model: ModelSpec) -> Api:
        """The wire API for `model`, or a one-line refusal that says what would work instead.

        `model.api` if given (it must be the provider's and one this runner speaks), else the
        runner's first API of the model's provider.
        """
        if model.api is None:
            fits = [a for a in self.apis if PROVIDER_OF_API[a] == model.provider]
            if fits:
                return fits[0]
            # A runner that speaks none of this provider's APIs speaks others'.
            theirs = list(dict.fromkeys(PROVIDER_OF_API[a] for a in self.apis))
            apis = f"{', '.join(self.apis)} API{'s' if len(self.apis) > 1 else ''}"
            models = " or ".join(f"{_article(p)} {p}: model" for p in theirs)
            raise LooplabError(
                f"runner {self.name!r} speaks only {' and '.join(theirs)} {apis}: use {models} with it, "
                f"not {_article(model.provider)} {model.provider} one"
            )
        check_api(model.api, model.provider)
        if model.api not in self.apis:
            raise LooplabError(f"runner {self.name!r} cannot use the {model.api} API; it speaks {', '.join(self.apis)}")
        return model.api

    def version(self, model: ModelSpec | None = None) -> str:
        """The installed version of the framework (for some runners, the one `model` uses)."""
        return installed_version(self.distribution)

    @abstractmethod
    def native_cap(self, limits: Limits) -> NativeCap:
        """The framework knob and the value set for these limits."""

    def tools_named_in_text(self, text: str) -> list[str]:
        """The tools a reply's text names, for a runner whose loop reads tool calls from text (a text protocol)
        rather than native tool calls; the recorder counts them as requested."""
        return []


def _article(word: str) -> str:
    """The indefinite article before `word` as spelled ("an openai", "a google")."""
    return "an" if word[0] in "aeiou" else "a"


def _on_off(stream: bool) -> str:
    return "on" if stream else "off"
