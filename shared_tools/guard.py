"""The tool boundary: every tool call of every runner passes through a `Guard`.

It checks the allowlist, validates arguments against the tool's schema, asks
for approval before an effect, detects repetition, times the call, and turns
every failure into an observation with `is_error=True` so the loop goes on.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import shlex
import threading
import time
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from looplab.shared_tools import tools as _tools
from looplab.shared_tools.daemon import DaemonPool
from looplab.shared_tools.errors import LooplabException
from looplab.shared_tools.live import WAIT_SLICE_S
from looplab.shared_tools.records import Outcome, StopSignal, ToolCallRecord, clean, preview
from looplab.shared_tools.workspace import PathRefused, Workspace

__all__ = ["Guard", "Tool"]

#: Tool arguments longer than this (as JSON text) are refused before they are parsed.
MAX_ARGS_CHARS = 1_000_000
#: How much of an invalid call's arguments its record keeps.
RECORDED_ARGS_CHARS = 2_000
#: The deepest arguments a record keeps as JSON; deeper ones are kept as their text, so every record fits a
#: results document, which refuses nesting past 200 levels.
RECORDED_ARGS_DEPTH = 32

#: Decides whether an effect tool may run: `(name, args) -> approved`.
Approver = Callable[[str, dict[str, Any]], bool]


@dataclass(frozen=True)
class Tool:
    """A tool function plus what the model is told about it."""

    name: str
    fn: Callable[..., str]
    description: str
    args_model: type[BaseModel]
    effect: bool = False
    #: False for a wrapper that may outlast the `timeout_s` it passes on (a fault that sleeps first).
    honours_timeout: bool = True
    #: The arguments' JSON Schema when another process validates them (a suite's tool host): `args_model` then
    #: takes any object, and the model is offered this.
    schema: dict[str, Any] | None = field(default=None, hash=False)

    @classmethod
    def from_function(cls, fn: Callable[..., str], *, effect: bool = False) -> Tool:
        """Build name, description and argument schema from `fn`'s signature and docstring.

        The first parameter (the workspace) and keyword-only parameters
        (operator knobs such as timeouts) are not shown to the model.
        """
        params = list(inspect.signature(fn).parameters.values())[1:]
        hints = typing.get_type_hints(fn, include_extras=True)
        fields = {
            p.name: (hints[p.name], ... if p.default is inspect.Parameter.empty else p.default)
            for p in params
            if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
        }
        model = create_model(f"{fn.__name__}_args", __config__=ConfigDict(extra="forbid"), **fields)
        return cls(fn.__name__, fn, inspect.cleandoc(fn.__doc__ or fn.__name__), model, effect)

    @functools.cached_property
    def timeout_default(self) -> float | None:
        """The default of the function's keyword-only `timeout_s`, if it takes one: its own bound."""
        param = inspect.signature(self.fn).parameters.get("timeout_s")
        return None if param is None else param.default

    @property
    def bounds_itself(self) -> bool:
        """Whether the function stops at the `timeout_s` it takes (run_tests kills pytest there, search_code stops
        searching): the Guard then runs it on the calling thread, with no worker to hand it to and wait on."""
        return self.honours_timeout and self.timeout_default is not None

    @property
    def parameters(self) -> dict[str, Any]:
        """JSON Schema of the arguments, as the providers' tool definitions take it (built once per argument model,
        so a copy of the tool with another function, as a fault makes, shares it); `schema` when it is set."""
        return self.schema if self.schema is not None else _schema(self.args_model)


class ToolFailed(LooplabException):
    """A tool's failure already worded as the model reads it (`SystemExit: 3`): the Guard shows its message as it is.

    For a failure that cannot reach the Guard as itself: an exception raised in a tool host, a BaseException a tool
    raised on a worker thread.
    """


def failure_text(exc: BaseException) -> str:
    """`Type: message`, what the model reads of a tool's exception (a message that cannot be made, said so)."""
    try:
        message = str(exc)
    except Exception:  # a broken __str__ is the tool's, not the Guard's
        message = "<its message could not be read>"
    return f"{type(exc).__name__}: {message}"


def _signal_of(exc: BaseException) -> bool:
    """Whether `exc` may have come from a signal rather than from a tool: Python raises a signal handler's exception
    (Ctrl-C's KeyboardInterrupt, looplab's `Interrupted`) on the main thread, never SystemExit or GeneratorExit
    unless code asks; such an exception is passed on, so Ctrl-C still stops a program that calls the Guard there."""
    tool_only = (Exception, SystemExit, GeneratorExit)
    return not isinstance(exc, tool_only) and threading.current_thread() is threading.main_thread()


@functools.cache
def _schema(args_model: type[BaseModel]) -> dict[str, Any]:
    schema = args_model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    return schema


def run_clock() -> Callable[[], float]:
    """A clock reading seconds since it was made: the one time base of a run's records."""
    t0 = time.monotonic()
    return lambda: time.monotonic() - t0


#: The tools looplab brings, in the order a run offers them; `write_file` is an effect (it runs only when approved).
BUILTIN_TOOLS: tuple[str, ...] = ("run_tests", "read_file", "search_code", "write_file")


def builtin_tool(name: str, *, test_command: Sequence[str] | None = None) -> Tool:
    """The built-in tool `name`; `run_tests` runs `test_command` (a list of arguments) when given, else pytest.

    `test_command` means nothing to the other tools. An unknown name, or a test command that is not a non-empty
    list of strings, is a one-line `ValueError`.
    """
    if name not in BUILTIN_TOOLS:
        raise ValueError(f"no built-in tool named {name!r}; the built-in tools are {', '.join(BUILTIN_TOOLS)}")
    if name == "run_tests" and test_command is not None:
        return _run_tests_with(_tools.check_test_command(test_command))
    return _shared(getattr(_tools, name), effect=name == "write_file")


def default_tools(*, allow_writes: bool = False, test_command: Sequence[str] | None = None) -> list[Tool]:
    """The shared tool set; `write_file` only when writes are allowed (still behind approval); `run_tests` runs
    `test_command` when given."""
    names = BUILTIN_TOOLS if allow_writes else tuple(n for n in BUILTIN_TOOLS if n != "write_file")
    return [builtin_tool(name, test_command=test_command) for name in names]


@functools.cache
def _shared(fn: Callable[..., str], effect: bool = False) -> Tool:
    # Built once per process: a Tool is immutable, and its schema costs about half a millisecond to build.
    return Tool.from_function(fn, effect=effect)


#: What `run_tests` tells the model its target is when a suite's own command runs it (pytest's test ids aside).
_CommandTarget = Annotated[
    str,
    Field(description="A test file or folder relative to the repo root, given to the test command as one argument."),
    _tools.RepoPath,
]


@functools.cache
def _run_tests_with(command: tuple[str, ...]) -> Tool:
    """`run_tests` running `command`, built once per command and process (its argument model once per process)."""
    shown = shlex.join(command)
    description = (
        f"Run the project's tests with `{shown}` on a test file and return its exit code and output.\n\n"
        "Use it first, to see whether a test fails and with which assertion, and\n"
        "again after a change to confirm a fix."
    )
    # `command` is keyword-only, so the bound function keeps run_tests' signature, `timeout_s` included.
    fn = functools.partial(_tools.run_tests, command=command)
    return dataclasses.replace(_shared(_tools.run_tests), fn=fn, description=description, args_model=_command_args())


@functools.cache
def _command_args() -> type[BaseModel]:
    return create_model("run_tests_args", __config__=ConfigDict(extra="forbid"), target=(_CommandTarget, ...))


@dataclass
class Guard:
    """Wraps the tool set bound to one workspace, for one run.

    `records` is the ordered log of every call; `stop` is set when a call
    should end the run (repetition, an effect not approved, or the run's
    deadline hit inside a tool).
    `cutoff`, when set, says why no model call is left to read a tool's result (None while one is).
    One rule for every transport (in process, over MCP): a call that reaches the Guard once `stop` is set
    or the cutoff speaks does not run. Its reply is a `skipped` error record saying why; no tool function
    is called and no approval asked, so the tools of a run's last allowed model call, and any call after
    the run ended, have no effect that no model sees. It is not kept in `records` (the model call's
    requested tools show it).
    `clock` reads seconds since the run started and `deadline` is on that
    clock; the model boundary shares it, so both logs interleave. `began`, when set, is when the run began on
    `clock`, before its session did (the harness starts the clock before it copies the workspace, so that the
    copy counts against `max_seconds`); None: the run began with its session.
    Thread-safe, since some frameworks run parallel tool calls on threads.
    """

    workspace: Workspace
    tools: Sequence[Tool] = field(default_factory=default_tools)
    max_repeats: int = 3
    approver: Approver | None = None
    deadline: float | None = None
    clock: Callable[[], float] = field(default_factory=run_clock)
    records: list[ToolCallRecord] = field(default_factory=list)
    stop: StopSignal | None = None
    cutoff: Callable[[], str | None] | None = None
    began: float | None = None

    def __post_init__(self) -> None:
        self._by_name = {t.name: t for t in self.tools}
        self._lock = threading.Lock()
        self._halted = threading.Event()
        #: Every call as it started, in order (finished or not): what repetition detection compares.
        self._started: list[tuple[str, Any]] = []

    def halt(self, detail: str) -> None:
        """End the run from outside it (its caller cancelled it): no call starts after this, the one running is
        not waited for, and the tests running in the workspace (and any started later) are killed."""
        self.stop = self.stop or StopSignal(reason="cancelled", detail=detail)
        self._halted.set()
        self.workspace.processes.end_all(for_good=True)

    @property
    def names(self) -> list[str]:
        return list(self._by_name)

    def get(self, name: str) -> Tool:
        return self._by_name[name]

    def call(self, name: str, args: Any, call_id: str | None = None) -> ToolCallRecord:
        """Run one tool call and return its record; never raises, whatever the arguments hold."""
        name = clean(name) if isinstance(name, str) else repr(name)
        started = self.clock()
        if why := self._ended():
            return self._skipped(name, args, call_id, why, started)
        try:
            outcome, text, args = self._dispatch(name, args)
        except Exception as exc:  # a bug in a check must still end as an observation, not a crash
            outcome, text, args = "error", f"{type(exc).__name__}: {exc}", _recordable(args)
        text = clean(text)
        record = ToolCallRecord(
            name=name,
            args=args,
            call_id=clean(call_id) if isinstance(call_id, str) else None,
            outcome=outcome,
            is_error=outcome != "ok",
            result=text,
            result_preview=preview(text),
            result_chars=len(text),
            started_at=round(started, 6),
            duration_s=round(self.clock() - started, 6),
        )
        with self._lock:
            self.records.append(record)
        return record

    def _ended(self) -> str | None:
        """Why no tool may run any more, if the run has ended or no model call is left to read a result."""
        if self.stop is not None:
            return f"the run has ended ({self.stop.reason}: {self.stop.detail})"
        if self.cutoff is not None and (why := self.cutoff()):
            self.stop = self.stop or StopSignal(
                reason="max_steps",
                detail=f"{why}; the tool calls of the last one did not run (no model call left to read them)",
            )
            return f"{why}; no model call is left to read this result"
        return None

    def _skipped(self, name: str, args: Any, call_id: Any, why: str, started: float) -> ToolCallRecord:
        """The reply to a call that must not run: an error record saying why, not kept in `records`."""
        text = f"NotRun: {why}, so {name} did not run"
        return ToolCallRecord(
            name=name,
            args=_recordable(args),
            call_id=clean(call_id) if isinstance(call_id, str) else None,
            outcome="skipped",
            is_error=True,
            result=text,
            result_preview=preview(text),
            result_chars=len(text),
            started_at=round(started, 6),
            duration_s=0.0,
        )

    def _dispatch(self, name: str, args: Any) -> tuple[Outcome, str, Any]:
        """Returns (outcome, observation text, the arguments as recorded)."""
        tool = self._by_name.get(name)
        parsed, problem = (None, None) if tool is None else parse_arguments(tool, args)
        with self._lock:  # started calls count at once, so identical calls in parallel are repeats too
            self._started.append((name, parsed if parsed is not None else object()))
            repeats = _trailing_repeats(self._started, self.max_repeats)
        if tool is None:
            problem = f"UnknownTool: no tool named {preview(name, 80)!r}; available tools: {', '.join(self._by_name)}"
            return "refused", problem, _recordable(args)
        if problem or parsed is None:
            return "error", problem or "InvalidArguments", _recordable(args)
        if repeats >= self.max_repeats:
            detail = f"{name} was called with the same arguments {self.max_repeats} times in a row"
            self.stop = self.stop or StopSignal(reason="repetition", detail=detail)
            return "repetition", f"RepetitionStopped: {detail}; the run is ended", parsed
        outcome, text = self._execute(tool, parsed)
        return outcome, text, parsed

    def _execute(self, tool: Tool, parsed: dict[str, Any]) -> tuple[Outcome, str]:
        name = tool.name
        if tool.effect and not (self.approver and self.approver(name, parsed)):
            who = "the approver said no" if self.approver else "no approver is configured, so effects are denied"
            self.stop = self.stop or StopSignal(reason="rejected", detail=f"{name} was not approved: {who}")
            return "rejected", f"ApprovalDenied: {name} is an effect tool and {who}; it did not run; the run is ended"
        kwargs = dict(parsed)
        remaining = self._remaining()
        if remaining is not None and tool.timeout_default is not None:
            kwargs["timeout_s"] = min(remaining, tool.timeout_default)
        try:
            run = functools.partial(tool.fn, self.workspace, **kwargs)
            text = self._bounded(name, run, remaining, inline=tool.bounds_itself)
            return (
                ("cancelled", f"Cancelled: the run was cancelled while {name} ran")
                if self._halted.is_set()
                else ("ok", text)
            )
        except PathRefused as exc:
            return "refused", f"PathRefused: {exc}"
        except (TimeoutError, _Halted) as exc:
            if self._halted.is_set():
                return "cancelled", f"Cancelled: the run was cancelled while {name} ran; its result is not awaited"
            if self._remaining() == 0.0:
                self.stop = self.stop or StopSignal(reason="timeout", detail=f"run deadline reached inside {name}")
                return "timeout", f"TimeoutError: {exc}"
            return "error", f"TimeoutError: {exc}"
        except BaseException as exc:  # a tool failure is an observation, never a crash: SystemExit included
            if _signal_of(exc):
                raise
            if self._halted.is_set():  # what the cancel did to it (its processes killed), not what it did
                return "cancelled", f"Cancelled: the run was cancelled while {name} ran"
            return "error", str(exc) if isinstance(exc, ToolFailed) else failure_text(exc)

    def _bounded(self, name: str, run: Callable[[], str], remaining: float | None, *, inline: bool) -> str:
        """`run()`, waited for until the run's deadline at most.

        On this thread without a deadline, or when the tool stops itself at it (`inline`); otherwise on a worker
        thread, which the run stops waiting for at its deadline (a hand-off that costs about 0.2 ms a call).
        """
        if remaining is not None and remaining <= 0:
            raise TimeoutError(f"the run's deadline had passed; {name} did not start")
        if remaining is None or inline:
            return run()
        job = _Job(run)
        _pool.submit(job)
        ends = time.monotonic() + remaining
        # In slices, so that a cancelled run stops waiting at once; the tool goes on in its (daemon) thread.
        while not job.done.wait(max(0.0, min(WAIT_SLICE_S, ends - time.monotonic()))):
            if self._halted.is_set():
                raise _Halted
            if time.monotonic() >= ends:
                raise TimeoutError(f"{name} was still running at the run's deadline; its result is not awaited")
        if job.error is not None:
            if not isinstance(job.error, Exception):  # a worker gets no signal: the tool's own SystemExit and kin
                raise ToolFailed(failure_text(job.error)) from None
            raise job.error
        return job.value

    def _remaining(self) -> float | None:
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - self.clock())


class _Halted(Exception):
    """The run was halted while a tool it waits for ran."""


@dataclass
class _Job:
    """One tool call handed to a worker thread; `done` is set when it returned or raised."""

    run: Callable[[], str]
    done: threading.Event = field(default_factory=threading.Event)
    value: str = ""
    error: BaseException | None = None

    def __call__(self) -> None:
        try:
            self.value = self.run()
        except BaseException as exc:  # handed to the waiting caller, which decides
            self.error = exc
        self.done.set()


_pool = DaemonPool("looplab-tool")


def _trailing_repeats(started: list[tuple[str, Any]], enough: int) -> int:
    """How many calls at the end of `started` equal the last one (counting stops at `enough`)."""
    last, count = started[-1], 0
    for call in reversed(started):
        if call != last or count == enough:
            break
        count += 1
    return count


def _recordable(args: Any) -> Any:
    """Arguments as a record may keep them: JSON-safe, UTF-8-safe, and not longer than a page."""
    if isinstance(args, bytes | bytearray):
        args = bytes(args).decode("utf-8", errors="replace")
    if not isinstance(args, str):
        try:
            text = json.dumps(args, ensure_ascii=False)
        except (TypeError, ValueError, RecursionError):
            return f"<arguments of type {type(args).__name__} that JSON cannot hold>"
        if len(text) <= RECORDED_ARGS_CHARS and not _deeper_than(args, RECORDED_ARGS_DEPTH):
            tidy = clean(text)
            return args if tidy is text else json.loads(tidy)
        args = text
    return clean(preview(args, RECORDED_ARGS_CHARS))


def _deeper_than(value: Any, depth: int) -> bool:
    """Whether JSON-like `value` nests arrays or objects more than `depth` levels deep (no recursion)."""
    level: list[tuple[Any, int]] = [(value, 0)]
    while level:
        item, at = level.pop()
        if isinstance(item, dict | list):
            if at >= depth:
                return True
            level.extend((inner, at + 1) for inner in (item.values() if isinstance(item, dict) else item))
    return False


def _shape(tool: Tool) -> str:
    """`{"path": "string"}`: the arguments a tool expects, for error messages."""
    return json.dumps({k: v.get("type", "any") for k, v in tool.parameters.get("properties", {}).items()})


def parse_arguments(tool: Tool, args: Any) -> tuple[dict[str, Any] | None, str | None]:
    """Decode and validate arguments; on failure, a message that shows the expected shape.

    Any input is an answer, never an exception: JSON nested past the parser's depth, bytes that are
    not UTF-8, text too long to be arguments. Strings come back without lone surrogates.
    """
    if isinstance(args, str | bytes | bytearray):
        if len(args) > MAX_ARGS_CHARS:
            return (
                None,
                f"InvalidArguments: {tool.name} arguments are {len(args)} characters; the limit is {MAX_ARGS_CHARS}",
            )
        try:
            args = json.loads(args or "{}")
        except json.JSONDecodeError as exc:
            problem = f"arguments are not valid JSON ({exc.msg})"
            return None, f"InvalidArguments: {tool.name} {problem}; expected {_shape(tool)}"
        except (ValueError, RecursionError) as exc:  # not UTF-8; nested deeper than the parser goes
            why = "nested too deeply" if isinstance(exc, RecursionError) else "not UTF-8 text"
            return None, f"InvalidArguments: {tool.name} arguments are {why}; expected {_shape(tool)}"
    if not isinstance(args, dict):
        return None, f"InvalidArguments: {tool.name} takes a JSON object; expected {_shape(tool)}"
    try:
        parsed = tool.args_model.model_validate(args).model_dump()
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors())
        return None, f"InvalidArguments: {tool.name}: {clean(problems)[:1_000]}; expected {_shape(tool)}"
    except RecursionError:
        return None, f"InvalidArguments: {tool.name} arguments are nested too deeply; expected {_shape(tool)}"
    return {k: clean(v) if isinstance(v, str) else v for k, v in parsed.items()}, None
