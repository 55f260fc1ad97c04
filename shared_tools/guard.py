"""The tool boundary: every tool call of every runner passes through a `Guard`.

It checks the allowlist, validates arguments against the tool's schema, asks
for approval before an effect, detects repetition, times the call, and turns
every failure into an observation with `is_error=True` so the loop goes on.
"""

from __future__ import annotations

import functools
import inspect
import json
import threading
import time
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from shared_tools import tools as _tools
from shared_tools.records import Outcome, StopSignal, ToolCallRecord, preview
from shared_tools.workspace import PathRefused, Workspace

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
    def parameters(self) -> dict[str, Any]:
        """JSON Schema of the arguments, as the providers' tool definitions take it (built once)."""
        schema = self.args_model.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        return schema


def run_clock() -> Callable[[], float]:
    """A clock reading seconds since it was made: the one time base of a run's records."""
    t0 = time.monotonic()
    return lambda: time.monotonic() - t0


def default_tools(*, allow_writes: bool = False) -> list[Tool]:
    """The shared tool set; `write_file` only when writes are allowed (still behind approval)."""
    tools = [_shared(f) for f in (_tools.run_tests, _tools.read_file, _tools.search_code)]
    if allow_writes:
        tools.append(_shared(_tools.write_file, effect=True))
    return tools


@functools.cache
def _shared(fn: Callable[..., str], effect: bool = False) -> Tool:
    # Built once per process: a Tool is immutable, and its schema costs about half a millisecond to build.
    return Tool.from_function(fn, effect=effect)


@dataclass
class Guard:
    """Wraps the tool set bound to one workspace, for one run.

    `records` is the ordered log of every call; `stop` is set when a call
    should end the run (repetition, an effect not approved, or the run's
    deadline hit inside a tool).
    `clock` reads seconds since the run started and `deadline` is on that
    clock; the model boundary shares it, so both logs interleave.
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

    def __post_init__(self) -> None:
        self._by_name = {t.name: t for t in self.tools}
        self._lock = threading.Lock()

    @property
    def names(self) -> list[str]:
        return list(self._by_name)

    def get(self, name: str) -> Tool:
        return self._by_name[name]

    def call(self, name: str, args: Any, call_id: str | None = None) -> ToolCallRecord:
        """Run one tool call and return its record; never raises for a tool failure."""
        started = self.clock()
        outcome, text, args = self._dispatch(name, args)
        record = ToolCallRecord(
            name=name,
            args=args,
            call_id=call_id,
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

    def _dispatch(self, name: str, args: Any) -> tuple[Outcome, str, Any]:
        """Returns (outcome, observation text, the arguments as recorded)."""
        tool = self._by_name.get(name)
        if tool is None:
            return "refused", f"UnknownTool: no tool named {name!r}; available tools: {', '.join(self._by_name)}", args
        parsed, problem = _parse_args(tool, args)
        if problem:
            return "error", problem, args
        outcome, text = self._execute(tool, parsed)
        return outcome, text, parsed

    def _execute(self, tool: Tool, parsed: dict[str, Any]) -> tuple[Outcome, str]:
        name = tool.name
        if self._is_repeat(name, parsed):
            detail = f"{name} was called with the same arguments {self.max_repeats} times in a row"
            self.stop = self.stop or StopSignal(reason="repetition", detail=detail)
            return "repetition", f"RepetitionStopped: {detail}; the run is ended"
        if tool.effect and not (self.approver and self.approver(name, parsed)):
            who = "the approver said no" if self.approver else "no approver is configured, so effects are denied"
            self.stop = self.stop or StopSignal(reason="rejected", detail=f"{name} was not approved: {who}")
            return "rejected", f"ApprovalDenied: {name} is an effect tool and {who}; it did not run; the run is ended"
        kwargs = dict(parsed)
        timeout = self._remaining()
        if timeout is not None and "timeout_s" in inspect.signature(tool.fn).parameters:
            kwargs["timeout_s"] = min(timeout, _tools.RUN_TESTS_TIMEOUT_S)
        try:
            return "ok", tool.fn(self.workspace, **kwargs)
        except PathRefused as exc:
            return "refused", f"PathRefused: {exc}"
        except TimeoutError as exc:
            if self._remaining() == 0.0:
                self.stop = self.stop or StopSignal(reason="timeout", detail=f"run deadline reached inside {name}")
                return "timeout", f"TimeoutError: {exc}"
            return "error", f"TimeoutError: {exc}"
        except Exception as exc:  # a tool failure is an observation, never a crash
            return "error", f"{type(exc).__name__}: {exc}"

    def _is_repeat(self, name: str, args: dict[str, Any]) -> bool:
        run = 1
        with self._lock:
            for rec in reversed(self.records):
                if (rec.name, rec.args) != (name, args):
                    break
                run += 1
        return run >= self.max_repeats

    def _remaining(self) -> float | None:
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - self.clock())


def _shape(tool: Tool) -> str:
    """`{"path": "string"}`: the arguments a tool expects, for error messages."""
    return json.dumps({k: v.get("type", "any") for k, v in tool.parameters.get("properties", {}).items()})


def _parse_args(tool: Tool, args: Any) -> tuple[dict[str, Any], str | None]:
    """Decode and validate arguments; on failure, a message that shows the expected shape."""
    if isinstance(args, str | bytes):
        try:
            args = json.loads(args or "{}")
        except json.JSONDecodeError as exc:
            problem = f"arguments are not valid JSON ({exc.msg})"
            return {}, f"InvalidArguments: {tool.name} {problem}; expected {_shape(tool)}"
    if not isinstance(args, dict):
        return {}, f"InvalidArguments: {tool.name} takes a JSON object; expected {_shape(tool)}"
    try:
        return tool.args_model.model_validate(args).model_dump(), None
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors())
        return {}, f"InvalidArguments: {tool.name}: {problems}; expected {_shape(tool)}"
