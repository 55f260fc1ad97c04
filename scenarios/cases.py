"""Cases are data: a TOML file names the repo, the task, the tools, the limits, the faults and the checks.

A case's `repo` is a folder relative to the case file, and its optional `overlay` another folder whose files are
laid over the repo's (a variant without a copy). A case belongs to a suite (`looplab.scenarios.suite`): the folder
that holds its `cases/` folder, whose `system_prompt.txt`, `tools.py` and `suite.toml` it shares. looplab's own
suite, the invoice-discount investigation, is what every command runs when no other cases are named
(`--cases PATH`, or `cases` in a `looplab.toml`). Adding a case, a variant or a repo needs no code change.

A case file is read strictly: an unknown key, a wrong type or a missing field is one line naming the file, the
table and the key, before anything runs. It is read under the files rule (a regular file, never blocking, at most
`MAX_CASE_BYTES`) and its nesting is bounded before it is parsed (`strict.read_toml`).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
)

from looplab.adapters.contract.agents import MAIN_AGENT, Delegate, not_delegating
from looplab.adapters.contract.errors import LooplabError
from looplab.adapters.contract.limits import Limits, StopReason
from looplab.adapters.contract.result import RunResult
from looplab.scenarios import strict
from looplab.scenarios.scripted.conversation import MAX_SEED_CHARS, PERSONA_HEADER, SEED_HEADER, Persona
from looplab.scenarios.suite import Suite, default_system_prompt, suite_at, suite_of
from looplab.scenarios.target import stated_task, target_problem
from looplab.shared_tools import BUILTIN_TOOLS, Fault, Tool, builtin_tool, with_faults
from looplab.shared_tools.repo_copy import check_repo

if TYPE_CHECKING:
    from looplab.adapters.contract.declaration import Declaration
    from looplab.adapters.contract.runner import RunnerDeclaration

__all__ = [
    "Case",
    "CheckResult",
    "ScriptedModel",
    "case_from_wire",
    "case_to_wire",
    "check",
    "default_system_prompt",
    "load_cases",
]

SCENARIOS_DIR = Path(__file__).resolve().parent
#: looplab's own suite: what every command runs when no cases are named.
BUILTIN_SUITE = SCENARIOS_DIR / "invoice_discount"
#: The tools a case offers when it lists none (`write_file` too when it allows writes).
DEFAULT_TOOLS = ("run_tests", "read_file", "search_code")
#: The most looplab reads of one case file: looplab's own are about 600 bytes and a task of a few pages is some
#: 10 KB, so 256 KiB holds any written by hand, while parsing it stays in milliseconds.
MAX_CASE_BYTES = 256 * 1024


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ObservationCheck(_Strict):
    """Some call of `tool` returned an observation containing `text`."""

    tool: str
    text: str


class Checks(_Strict):
    """What a run must show for the case to pass; every field is optional."""

    stop_reason: StopReason | list[StopReason] | None = Field(None, description="The stop reason, or the allowed ones.")
    answer_mentions: list[str] = Field(default_factory=list)
    answer_excludes: list[str] = Field(default_factory=list)
    tools_called: list[str] = Field(default_factory=list)
    tools_not_called: list[str] = Field(default_factory=list, description="Tools that must never run (outcome ok).")
    files_read: list[str] = Field(default_factory=list, description="Paths read_file returned content for.")
    refused: list[str] = Field(default_factory=list, description="First arguments of calls that must be refused.")
    observation_contains: list[ObservationCheck] = Field(default_factory=list)
    parallel_calls: int | None = Field(None, description="Some step holds at least this many tool calls.")
    delegates_at_once: int | None = Field(
        None, description="Some reply asked at least this many delegates at once (calls of no tool the case offers)."
    )
    failed_calls: int | None = Field(
        None, description="At least this many requested tool calls did not run (refused, invalid, unknown)."
    )
    max_model_calls: int | None = None
    max_wall_s: float | None = None
    workspace_unchanged: bool = False
    delegated: bool = Field(
        False, description="The case's delegate (and each agent below it) made model calls: the work was handed on."
    )
    last_call_by: str | None = Field(
        None, description="The agent that made the run's last model call (a budget that ran out in its work)."
    )


def _left_out(data: dict[str, Any], **defaults: Any) -> dict[str, Any]:
    """`data` without the keys that hold the given defaults. Keys added to a case after its hash was first recorded
    are dumped only when set: a case's hash (`records.identity.case_hash`, over its dump) stays what it was, so the
    documents written before them still merge and resume."""
    return {k: v for k, v in data.items() if k not in defaults or v != defaults[k]}


#: What a seed may hold: visible ASCII, as an HTTP header value carries it unchanged.
SEED = re.compile(r"^[!-~]+$")


class ScriptedModel(_Strict):
    """How the scripted model plays this case: its persona, the seed of its chance and its price (for cost
    budgets)."""

    persona: Persona = "careful"
    seed: str | None = Field(
        None,
        max_length=MAX_SEED_CHARS,
        pattern=SEED.pattern,
        description="What a persona that plays by chance (noisy) seeds its dice with; a repeat of `looplab eval` "
        "sets it to the case's id and the repeat's number.",
    )
    input_per_mtok: float = 0.0
    output_per_mtok: float = 0.0

    @model_serializer(mode="wrap")
    def _without_unset_seed(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _left_out(handler(self), seed=None)

    @property
    def headers(self) -> dict[str, str]:
        """The request headers that tell the scripted model how to play: its persona (and seed, when set) travel
        beside the request, so the model name stays `scripted` whatever the persona."""
        return {PERSONA_HEADER: self.persona, **({SEED_HEADER: self.seed} if self.seed is not None else {})}


#: looplab's code reader: the second agent of the delegation cases, unless a case says otherwise.
CODE_READER_PROMPT_PATH = Path(__file__).resolve().parent / "code_reader_prompt.txt"
CODE_READER_DESCRIPTION = (
    "Finds where a function is defined and reads it: give it the function's name; it answers with the file's "
    "path and the file's text."
)


class DelegateSpec(_Strict):
    """A case's `[delegate]`: the second agent its runner's agent may hand a sub-question to, and in a nested
    case (`[delegate.delegate]`) the agent that one may hand it on to."""

    name: str = "code_reader"
    description: str = CODE_READER_DESCRIPTION
    instructions: str | None = Field(
        None, description="Its system prompt; looplab's code reader's, introducing it by its name, if unset."
    )
    delegate: DelegateSpec | None = Field(None, description="The agent it may hand its question on to.")

    def agent(self) -> Delegate:
        # The default prompt's first line names the agent, so each agent of a tree is told apart by its requests.
        instructions = self.instructions or CODE_READER_PROMPT_PATH.read_text(encoding="utf-8").replace(
            "{name}", self.name
        )
        below = self.delegate.agent() if self.delegate is not None else None
        return Delegate(name=self.name, description=self.description, instructions=instructions, delegate=below)

    @property
    def names(self) -> list[str]:
        """Its name and those of the agents below it, top down."""
        return [self.name, *(self.delegate.names if self.delegate is not None else [])]


class Case(_Strict):
    """One investigation to run through every runner.

    Read from a file by `load_case`, it knows that file (its `repo` and `overlay` are relative to it) and its
    suite (whose own tools it may offer); one built in code has neither, and its folders are relative to the
    working directory.
    """

    id: str = Field(min_length=1)
    description: str = ""
    repo: str = Field(description="The repo's folder, relative to the case file.")
    overlay: str | None = Field(None, description="A folder whose files are laid over the repo's, relative to it.")
    target: str = Field(
        description="The failing test investigated, e.g. tests/test_x.py::test_y; the task sent states it when the "
        "task's wording names no test or another one."
    )
    task: str
    system_prompt: str = Field(description="What every runner is told first; the suite's system_prompt.txt if unset.")
    allow_writes: bool = Field(False, description="Offer write_file (still behind the approval gate).")
    tools: list[str] = Field(
        default_factory=list,
        description="The tools offered, built-in or the suite's own; by default run_tests, read_file, search_code "
        "(and write_file when writes are allowed).",
    )
    effects: list[str] = Field(default_factory=list, description="Which of the suite's own tools are effects.")
    test_command: list[str] | None = Field(
        None, min_length=1, description="What run_tests runs, as arguments; `{target}` is the test (else appended)."
    )
    limits: Limits = Field(default_factory=Limits)
    faults: list[Fault] = Field(default_factory=list)
    model: ScriptedModel = Field(default_factory=ScriptedModel)
    checks: Checks = Field(default_factory=Checks)
    delegate: DelegateSpec | None = Field(None, description="A second agent the runner's agent may hand work to.")
    by_default: bool = Field(
        True,
        description="Run when no --case names it; false for a case whose outcome is chance by design (`load_cases` "
        "leaves it out unless asked for every case).",
    )

    _file: Path | None = PrivateAttr(None)
    _suite: Suite | None = PrivateAttr(None)

    @model_serializer(mode="wrap")
    def _without_default_by_default(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _left_out(handler(self), by_default=True)

    @field_validator("tools")
    @classmethod
    def _listed_once(cls, tools: list[str]) -> list[str]:
        if repeated := sorted({t for t in tools if tools.count(t) > 1}):
            raise ValueError(f"{repeated[0]} is listed twice")
        return tools

    def model_post_init(self, context: Any, /) -> None:
        """Fill in the default tools; writes allowed add write_file."""
        if not self.tools:
            self.tools = [*DEFAULT_TOOLS, *(["write_file"] if self.allow_writes else [])]
        elif self.allow_writes and "write_file" not in self.tools:
            self.tools.append("write_file")

    @property
    def file(self) -> Path | None:
        """The file the case was read from, if any."""
        return self._file

    @property
    def suite(self) -> Suite | None:
        """The suite the case belongs to, if it was read from a file."""
        return self._suite

    @property
    def repo_path(self) -> Path:
        """The repo's folder."""
        return self._relative(self.repo)

    @property
    def overlay_path(self) -> Path | None:
        """The overlay's folder, if the case has one."""
        return self._relative(self.overlay) if self.overlay else None

    def _relative(self, folder: str) -> Path:
        return (self._file.parent / folder).resolve() if self._file else Path(folder)

    @property
    def stated_task(self) -> str:
        """The task as every runner sends it: the case's task, with a line stating its target when the task names
        no test or another one (the target is what is investigated, whatever the wording)."""
        return stated_task(self.task, self.target)

    @property
    def tools_beyond_scripted(self) -> list[str]:
        """The tools it offers that the scripted model never calls: such a case needs a real model."""
        from looplab.scenarios.scripted.policy import TOOLS_IT_DRIVES

        return [t for t in self.tools if t not in TOOLS_IT_DRIVES]

    @property
    def own_tools(self) -> list[str]:
        """The tools it offers that are not looplab's built-in ones."""
        return [t for t in self.tools if t not in BUILTIN_TOOLS]

    def tool_set(self) -> list[Tool]:
        """The tools a run of this case gets, in the order listed, with its faults in them."""
        functions = self._suite.functions if self._suite else {}
        tools = []
        for name in self.tools:
            if name in BUILTIN_TOOLS:
                tools.append(builtin_tool(name, test_command=self.test_command))
            elif name in functions:  # run by the run's tool host, not in this process
                tools.append(functions[name].tool(effect=name in self.effects))
            else:
                raise LooplabError(f"case {self.id!r}: no tool named {name!r}")
        return with_faults(tools, self.faults)

    @property
    def delegation_shape(self) -> str | None:
        """Which of the delegation shapes (`contract.agents.SHAPES`) it asks of a runner: `nested` when its delegate
        has one of its own, `parallel` when its model asks several delegates in one reply; None for neither."""
        if self.delegate is None:
            return None
        if self.delegate.delegate is not None:
            return "nested"
        return "parallel" if self.model.persona == "fanout" else None

    def not_run_on(self, runner: RunnerDeclaration | Declaration) -> str | None:
        """Why the case does not apply to `runner`, in one line (None: it does): one with a delegate needs a
        framework that can delegate, in the shape it asks."""
        if self.delegate is None:
            return None
        return not_delegating(runner.delegation, runner.delegation_gaps, self.delegation_shape)

    def race_on(self, runner: RunnerDeclaration | Declaration) -> str | None:
        """What thread timing decides when the case runs on `runner`, in one line (its declaration's
        `delegation_races` for the case's shape); None: nothing."""
        shape = self.delegation_shape
        return None if shape is None or not self.runs_on(runner) else runner.delegation_races.get(shape)

    def runs_on(self, runner: RunnerDeclaration | Declaration) -> bool:
        """Whether the case applies to `runner` (`not_run_on`)."""
        return self.not_run_on(runner) is None

    def for_repeat(self, k: int) -> Case:
        """This case as its `k`th repeat runs it: a copy (its file and suite kept) whose scripted model is seeded
        `<id>#<k>`, so each repeat of a case that plays by chance rolls its own dice, and the same ones every time.
        An id a header cannot carry as it is (too long, or not visible ASCII) seeds by its digest."""
        seed = f"{self.id}#{k}"
        if len(seed) > MAX_SEED_CHARS or not SEED.fullmatch(seed):
            seed = f"{hashlib.sha256(self.id.encode('utf-8', 'surrogatepass')).hexdigest()}#{k}"
        return self.model_copy(update={"model": self.model.model_copy(update={"seed": seed})})

    def attach(self, file: Path, suite: Suite) -> Case:
        """This case as read from `file`, in `suite`: where its folders and own tools are found."""
        self._file, self._suite = file.resolve(), suite
        return self


class CheckResult(BaseModel):
    name: str
    passed: bool
    detail: str


#: The keys a case file may set.
CASE_KEYS = tuple(Case.model_fields)


def load_case(path: Path, *, import_tools: bool = True, sandbox: bool = False, check_target: bool = True) -> Case:
    """One case file; a bad one is a one-line `LooplabError` naming the file, the table and the key.

    `import_tools=False` reads the suite's `tools.py` without running it: the tools a case lists are checked
    against the names its source defines (what `looplab cases` needs). Otherwise a tool host runs it now and
    describes its tools (never in this process), so a run's tools that do not import, or are no tools, are refused
    before anything runs. `sandbox`: that host runs in the sandbox (`--sandbox`), as the run's own hosts will.
    `check_target=False` leaves the target unchecked (`load_cases` checks every case's once all its files are read,
    so a case file that cannot be read is reported first).
    """
    path = Path(path)
    data = strict.read_toml(path, limit=MAX_CASE_BYTES)
    try:
        suite = suite_at(suite_of(path), sandbox)
        if import_tools:
            list(suite.functions)  # has tools.py described by a tool host (once a process)
    except LooplabError as exc:
        raise LooplabError(f"{path}: its suite cannot load: {exc}") from None
    shared = {"system_prompt": suite.system_prompt, **suite.defaults.model_dump(exclude_defaults=True)}
    case = strict.validate(Case, {**shared, **data}, path).attach(path, suite)
    _check_tools(case, suite, path, import_tools=import_tools)
    for folder in filter(None, (case.repo_path, case.overlay_path)):
        if not folder.is_dir():
            raise LooplabError(f"{path}: folder {folder} does not exist")
        try:  # what a run would refuse to copy (the file system's root, a folder holding the temporary folder)
            check_repo(folder)
        except (OSError, ValueError) as exc:
            raise LooplabError(f"{path}: {exc}") from None
    if check_target:
        _check_target(case)
    return case


def _check_target(case: Case) -> None:
    """The case's target is a test its test command can run in its repo: the file is there and, for a Python
    `path::name`, the file defines the name. Only a case offering run_tests is held to it: the target is what
    run_tests runs (a case of other tools may name a placeholder)."""
    if "run_tests" not in case.tools:
        return
    if problem := target_problem(case.target, case.repo_path, case.overlay_path):
        raise LooplabError(f"{case.file}: target: {problem}")


def _check_tools(case: Case, suite: Suite, path: Path, *, import_tools: bool) -> None:
    """Every tool the case lists exists, its effects are its own tools, and its faults name tools it offers;
    with `import_tools`, its own tools are made too (a function that cannot be a tool is refused)."""
    known = [*BUILTIN_TOOLS, *suite.tool_names]
    for name in case.tools:
        if name not in known:
            own = f"; its suite's tools.py defines {', '.join(suite.tool_names)}" if suite.tool_names else ""
            raise LooplabError(
                f"{path}: tools: no tool named {name!r}{strict.nearest(name, known)} "
                f"(looplab's built-in tools are {', '.join(BUILTIN_TOOLS)}{own})"
            )
    for name in case.effects:
        if name not in case.own_tools:
            why = (
                "only the suite's own tools are marked (write_file always is an effect)"
                if name in BUILTIN_TOOLS
                else f"effects name tools the case offers{strict.nearest(name, case.own_tools)}"
            )
            raise LooplabError(f"{path}: effects: {name!r} is not one of the case's own tools: {why}")
    for i, fault in enumerate(case.faults):
        if fault.tool not in case.tools:
            where = strict.place(("faults", i, "tool"))
            raise LooplabError(f"{path}: {where}: {fault.tool!r} is not a tool the case offers")
    try:
        if import_tools:
            case.tool_set()
    except (TypeError, ValueError) as exc:  # a tools.py function that cannot be a tool
        raise LooplabError(f"{path}: {suite.folder / 'tools.py'}: {exc}") from None


def case_files(source: Path) -> list[Path]:
    """The case files a source names: the file itself, or a suite folder's `cases/*.toml`.

    Anything else at a case file's path (a FIFO, a folder named `x.toml`, a link to nothing) is a case file that
    the files rule refuses when it is read, in one line naming it; listing a folder opens none of its files.
    """
    if source.is_dir():
        found = sorted((source / "cases").glob("*.toml"))
        if not found:
            raise LooplabError(f"{source}: not a suite: no cases/*.toml in it")
        return found
    if os.path.lexists(source):
        return [source]
    raise LooplabError(f"{source}: no such case file or suite folder")


@cache
def _load(sources: tuple[Path, ...], import_tools: bool, sandbox: bool) -> dict[str, Case]:
    cases: dict[str, Case] = {}
    for source in sources:
        for path in case_files(source):
            case = load_case(path, import_tools=import_tools, sandbox=sandbox, check_target=False)
            if case.id in cases:
                raise LooplabError(f"{path}: duplicate case id {case.id!r} (also in {cases[case.id].file})")
            cases[case.id] = case
    for case in cases.values():  # looked at in the repo last: every case file was read first
        _check_target(case)
    return cases


def load_cases(
    sources: Iterable[Path | str] = (), *, import_tools: bool = True, sandbox: bool = False, every: bool = False
) -> dict[str, Case]:
    """The cases of `sources` (case files or suite folders) by id, in order; looplab's own suite when none.

    A suite's cases that run only when named (`by_default = false`) are left out unless `every` (a case file named
    as a source is named). `import_tools=False`: the suites' `tools.py` files are read, not run; `sandbox`: they
    run in the sandbox (see `load_case`).
    """
    named = tuple(dict.fromkeys(Path(s).resolve() for s in sources)) or (BUILTIN_SUITE,)
    cases = _load(named, import_tools, sandbox)
    return {i: c for i, c in cases.items() if every or c.by_default or c.file in named}


def case_to_wire(case: Case) -> dict[str, Any]:
    """A case as JSON for a process that runs it (a lane in a runner environment): its fields and its file."""
    sandbox = case._suite is not None and case._suite.sandbox  # its tools.py is described as it was here
    return {"file": str(case.file) if case.file else None, "case": case.model_dump(mode="json"), "sandbox": sandbox}


def case_from_wire(data: dict[str, Any]) -> Case:
    """The case `case_to_wire` sent, with its suite loaded again here."""
    case = Case.model_validate(data["case"])
    if data.get("file"):
        file = Path(data["file"])
        case.attach(file, suite_at(suite_of(file), bool(data.get("sandbox"))))
    return case


def check(
    case: Case,
    result: RunResult,
    workspace_changed: bool,
    *,
    one_tool_a_reply: bool = False,
    scripted: bool = True,
) -> list[CheckResult]:
    """Evaluate a case's checks against one run.

    Four checks are about what the case's persona asks for (bad calls, several calls or delegates in one reply,
    paths outside the repo). A persona is how the scripted model plays: with another model (`scripted=False`)
    nobody plays it, so those checks are recorded as not applicable rather than failed; the checks on what the
    runner did with the model's requests (the stop, the answer, what ran) hold for every model.
    """
    c, out = case.checks, []
    calls = result.trace.tool_calls
    unplayed = None if scripted or case.model.persona == "careful" else case.model.persona

    def add(name: str, passed: bool, detail: str) -> None:
        out.append(CheckResult(name=name, passed=passed, detail=detail))

    def not_played(name: str) -> bool:
        """Record `name` as not applicable when the persona that would exercise it is not played."""
        if unplayed is not None:
            add(name, True, f"not applicable: the {unplayed} persona is the scripted model's, and it did not play")
        return unplayed is not None

    if c.stop_reason is not None:
        allowed = c.stop_reason if isinstance(c.stop_reason, list) else [c.stop_reason]
        expected = " or ".join(map(str, allowed))
        add("stop_reason", result.stop_reason in allowed, f"expected {expected}, got {result.stop_reason}")
    if result.stop_reason == StopReason.FINAL_ANSWER:
        # An answer given without one tool call that ran is no investigation, whatever the case checks for.
        ran = sum(call.outcome == "ok" for call in calls)
        add("investigated before answering", ran > 0, f"{ran} tool calls ran")
    answer = (result.answer or "").lower()
    for word in c.answer_mentions:
        add(f"answer mentions {word}", word.lower() in answer, "yes" if word.lower() in answer else "no")
    for word in c.answer_excludes:
        add(
            f"answer does not mention {word}",
            word.lower() not in answer,
            "no" if word.lower() not in answer else "it does",
        )
    called = sorted({call.name for call in calls})
    for tool in c.tools_called:
        add(f"called {tool}", tool in called, f"tools called: {called}")
    for tool in c.tools_not_called:
        ran = [call for call in calls if call.name == tool and call.outcome == "ok"]
        add(f"{tool} did not run", not ran, f"{tool} ran {len(ran)} times")
    read = [call.first_arg for call in calls if call.name == "read_file" and call.outcome == "ok"]
    for path in c.files_read:
        add(f"read {path}", path in read, f"files read: {read}")
    for arg in c.refused:
        if not_played(f"refused {arg}"):
            continue
        outcomes = [call.outcome for call in calls if call.first_arg == arg]
        add(f"refused {arg}", bool(outcomes) and set(outcomes) == {"refused"}, f"outcomes: {outcomes or 'never asked'}")
    for obs in c.observation_contains:
        found = any(call.name == obs.tool and obs.text in call.result for call in calls)
        add(f"{obs.tool} observation contains {obs.text!r}", found, "found" if found else "not found")
    if c.parallel_calls is not None:
        name = f"a step with {c.parallel_calls} tool calls"
        most = max((len(s.tool_calls) for s in result.trace.steps), default=0)
        if not_played(name):
            pass
        elif one_tool_a_reply:
            add(name, True, "not applicable: the runner's loop lets the model name one tool a reply")
        else:
            add(name, most >= c.parallel_calls, f"most tool calls in a step: {most}")
    if c.delegates_at_once is not None:
        asked = max((sum(t not in case.tools for t in s.model_call.tool_calls_requested) for s in result.trace.steps),
                    default=0)  # fmt: skip
        name = f"a reply asking {c.delegates_at_once} delegates at once"
        if not not_played(name):
            add(name, asked >= c.delegates_at_once, f"most delegates asked in a reply: {asked}")
        # Each delegate's work ends in a reply that calls no tool: its answer (one refused or dropped makes none).
        answers = sum(s.model_call.agent not in (None, MAIN_AGENT) and not s.model_call.tool_calls_requested
                      for s in result.trace.steps)  # fmt: skip
        add(f"{c.delegates_at_once} delegates answered", answers >= c.delegates_at_once, f"{answers} answered")
    if c.failed_calls is not None and not not_played(f"at least {c.failed_calls} failed tool calls"):
        requested = sum(len(s.model_call.tool_calls_requested) for s in result.trace.steps)
        failed = requested - sum(call.outcome == "ok" for call in calls)
        detail = f"{failed} of {requested} requested"
        add(f"at least {c.failed_calls} failed tool calls", failed >= c.failed_calls, detail)
    if c.max_model_calls is not None:
        n = result.totals.model_calls
        add(f"at most {c.max_model_calls} model calls", n <= c.max_model_calls, f"{n} model calls")
    if c.max_wall_s is not None:
        wall = result.totals.wall_s
        add(f"wall time at most {c.max_wall_s:g} s", wall <= c.max_wall_s, f"{wall:.2f} s")
    if case.limits.max_cost_usd is not None:
        spent, budget = result.totals.cost_usd, case.limits.max_cost_usd
        within = spent is not None and spent <= budget  # an unknown spend is not within any budget
        add("spent within max_cost_usd", within, f"{'unknown' if spent is None else f'{spent:.6f}'} of {budget:g}")
    if (budget := case.limits.max_tokens) is not None:
        calls = [s.model_call for s in result.trace.steps]
        spent, last_output = (
            result.totals.input_tokens + result.totals.output_tokens,
            calls[-1].output_tokens if calls else 0,
        )
        # No call starts once the budget is spent: only the last call's output may take the total past it.
        add(
            "tokens within max_tokens",
            spent - last_output <= budget,
            f"{spent} of {budget} (last output {last_output})",
        )
    if c.delegated and case.delegate is not None:
        for name in case.delegate.names:  # in a nested case, every agent of the tree got work
            theirs, steps = sum(s.model_call.agent == name for s in result.trace.steps), len(result.trace.steps)
            add(f"handed work to {name}", theirs > 0, f"{theirs} of {steps} model calls were {name}'s")
    if c.last_call_by is not None:
        last = result.trace.steps[-1].model_call.agent if result.trace.steps else None
        add(f"the last model call was {c.last_call_by}'s", last == c.last_call_by, f"it was {last}'s")
    if c.workspace_unchanged:
        add("workspace unchanged", not workspace_changed, "changed" if workspace_changed else "byte-for-byte the same")
    if result.stop_reason != StopReason.FINAL_ANSWER:
        add("no answer on a non-final stop", result.answer is None, f"answer={result.answer!r}")
    return out
