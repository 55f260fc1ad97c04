"""Runners in another process: the contract a child program gets, and the one way looplab runs it.

A child (a TypeScript loop, a team's own agent in any language) reaches the model through the
run's recording proxy and the tools through the run's MCP tool server, so its run is recorded,
gated and checked like any in-process runner's. It gets, in its environment and nothing more
(no provider key, no other variable of looplab's beyond an allowlist):

| variable | what it holds |
|---|---|
| `LOOPLAB_TASK` | the task, as the user's first message |
| `LOOPLAB_SYSTEM_PROMPT` | the run's system prompt (the case's), the same for every runner |
| `LOOPLAB_MODEL` | the model name to send |
| `LOOPLAB_API` | `chat`, `responses`, `messages` or `gemini`: the wire API to speak |
| `LOOPLAB_OPENAI_BASE_URL` | the proxy, as an OpenAI SDK's base URL (ends in `/v1`) |
| `LOOPLAB_ANTHROPIC_BASE_URL` | the proxy, as an Anthropic SDK's base URL |
| `LOOPLAB_GEMINI_BASE_URL` | the proxy, as a Gemini SDK's base URL (without the API version, `/v1beta`) |
| `LOOPLAB_TOKEN` | the run's token: the API key for the proxy, and `Authorization: Bearer` for the tool server |
| `LOOPLAB_TOOLS_URL` | the run's tools, as an MCP streamable HTTP endpoint |
| `LOOPLAB_CAP_KNOB`, `LOOPLAB_CAP` | the native cap to set and its value (empty: leave the framework's default) |
| `LOOPLAB_CHILD_CAP` | that knob's value for every agent the run's agent delegates to (empty: their default) |
| `LOOPLAB_ENDING_TOOL` | a tool to mark as ending the run with its result (`Probe.ending_tool`; empty: none) |
| `LOOPLAB_MAX_SECONDS` | the run's wall-clock budget: at its end the program gets SIGTERM, and SIGKILL 0.3 s later |
| `LOOPLAB_RETRIES` | retries of a failed model request the program's SDK should make (looplab's `--retries`) |
| `LOOPLAB_STREAM` | `1`: ask the model for streamed replies, `0`: whole ones (`--stream`, else the runner's default) |
| `LOOPLAB_RESULT` | a file to write the outcome to, as JSON |
| `LOOPLAB_DELEGATE` | a case's second agent, if any: JSON of `name`, `description`, `instructions`, `parameters` |

The outcome file holds `{"text": ..., "ended": "returned" | "raised", "exception": ..., "message": ...}`:
the final text if the loop returned one, or the exception's name and message if it raised; and, if the program
reads them, `"counters": {WHERE: N}`, the framework's own counters as the run left them (`NativeEnd.counters`). A
child that writes none (it crashed, or was killed at its bound) ends the run as `error`, with the
tail of its output; the boundaries decide the stop either way, as for every runner. The outcome is
read only if it is a regular file (never through a link, never a FIFO or a device) of at most
`OUTCOME_MAX_BYTES` holding a JSON object; anything else ends the run as `error` saying what it was.

`LOOPLAB_DELEGATE` reaches only a runner that declares `delegation` (`Runner.run` refuses a delegate to any
other, `external` among them); in a nested tree its `delegate` holds the agent it may hand work to in turn, in the
same form; its `parameters` are the JSON Schema of the tool that asks the agent (one
`question` string), for a framework where the program writes that tool.

How the process is bounded (time, descendants, output, interrupts, secrets): `looplab.adapters.boundary.processes`.
"""

from __future__ import annotations

import json
import logging
import os
from abc import abstractmethod
from pathlib import Path
from typing import Any

from looplab.adapters.boundary.processes import (
    OUTCOME_MAX_BYTES,
    STDERR_LINES,
    child_environment,
    run_bounded,
    scratch_folder,
)
from looplab.adapters.boundary.proxy import ModelProxy
from looplab.adapters.boundary.tool_server import ToolServer, require_mcp
from looplab.adapters.contract import files
from looplab.adapters.contract.agents import Delegate
from looplab.adapters.contract.errors import ChildFailed, ChildRaised
from looplab.adapters.contract.model import ModelSpec, ToolTransport
from looplab.adapters.contract.result import Finished, NativeEnd
from looplab.adapters.session import Runner, RunSession

#: The most counters an outcome's `counters` may give, and the longest name of one: more is not kept.
COUNTERS_MAX, COUNTER_NAME_MAX = 16, 120


class ChildRunner(Runner):
    """A runner whose loop is another program; subclasses say which command starts it."""

    out_of_process = True

    @abstractmethod
    def command(self, session: RunSession) -> list[str]:
        """The program to start for this run (it reads the contract from its environment)."""

    def workdir(self) -> Path | None:
        """Where the program runs (None: its scratch folder)."""
        return None

    def prepare(self, model: ModelSpec, tools: ToolTransport) -> Any:
        """Import the MCP SDK (seconds, once a process), so the tool server's start stays off the run's clock."""
        require_mcp()
        return None

    def loop(self, task: str, session: RunSession) -> Finished:
        api = self.api_for(session.model)
        command = self.command(session)
        with scratch_folder() as tmp, ModelProxy(session) as proxy:
            with ToolServer(session.guard, token=proxy.token) as tools:
                session.tool_transport = "mcp"
                outcome = tmp / "outcome.json"
                env = child_environment(
                    task=task,
                    system_prompt=session.system_prompt,
                    model=session.model.name,
                    api=api,
                    openai_base_url=proxy.openai_base_url,
                    anthropic_base_url=proxy.anthropic_base_url,
                    gemini_base_url=proxy.gemini_base_url,
                    token=proxy.token,
                    tools_url=tools.url,
                    cap_knob=session.knob,
                    cap="" if session.cap is None else str(session.cap),
                    child_cap="" if session.child_cap is None else str(session.child_cap),
                    ending_tool=session.ending_tool or "",
                    max_seconds=f"{session.limits.max_seconds:g}",
                    retries=str(session.model.retries),
                    stream="1" if session.model.stream else "0",
                    result=str(outcome),
                    **_delegate(session),
                )
                code, output = run_bounded(
                    command, env, self.workdir() or tmp, session.remaining_s(), session.cancelled
                )
                try:
                    data = _read(outcome)
                except ChildFailed as bad:
                    data, unreadable = None, bad
                else:
                    unreadable = None
        for line in output[-STDERR_LINES:]:
            logging.getLogger(f"{self.name} stderr").warning(line)
        if data is None:
            tail = " | ".join(output[-3:]) or "no output"
            why = unreadable or ChildFailed(f"the runner process exited {code} without an outcome: {tail}")
            return session.conclude(None, why)
        session.report_counters(_counters(data.get("counters")))
        if data.get("ended") == "raised":
            name = str(data.get("exception") or "Error")
            if session.stop is not None:  # what it raised was the proxy's refusal: say so, as in-process, and how
                refused = "refused by the model boundary"
                session.native_end = NativeEnd(kind=refused, exception=name, message=session.stop.detail)
            error = _raised(name, str(data.get("message") or ""))
            return session.conclude(None, error)
        text = data.get("text")
        return session.conclude(text if isinstance(text, str) else None)


def _delegate(session: RunSession) -> dict[str, str]:
    """`LOOPLAB_DELEGATE`'s entry, for a run with a delegate (`Runner.run` refuses one to a runner that cannot)."""
    return {} if session.delegate is None else {"delegate": json.dumps(_fields(session.delegate))}


def _fields(d: Delegate) -> dict[str, Any]:
    """A delegate as `LOOPLAB_DELEGATE` holds it, its own delegate (a nested tree) under `delegate`."""
    fields = {"name": d.name, "description": d.description, "instructions": d.instructions, "parameters": d.parameters}
    return fields | ({"delegate": _fields(d.delegate)} if d.delegate is not None else {})


def _read(path: Path) -> dict[str, Any] | None:
    """The child's outcome: None if it wrote none; `ChildFailed` saying what is wrong with one it wrote badly.

    Read by `adapters.files`' rule for a file looplab is handed, and stricter: a link is not followed, and
    at most `OUTCOME_MAX_BYTES` are read (a FIFO or device is refused without waiting on it).
    """
    if not os.path.lexists(path):
        return None
    name = "the runner process's outcome (LOOPLAB_RESULT)"
    try:
        raw = files.read_bytes(path, limit=OUTCOME_MAX_BYTES, follow_links=False)
    except files.FileRefused as refused:
        raise ChildFailed(f"{name}: {str(refused).removeprefix(f'{path}: ')}") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except ValueError as exc:  # UnicodeDecodeError is one
        raise ChildFailed(f"{name} is not JSON in UTF-8: {str(exc)[:200]}") from None
    if not isinstance(data, dict):
        raise ChildFailed(f"{name} holds a JSON {_JSON_TYPES.get(type(data), 'value')}, not an object")
    return data


def _counters(raw: object) -> dict[str, int]:
    """The outcome's `counters`, as far as it is an object of whole numbers by name: a name longer than
    `COUNTER_NAME_MAX`, a value that is not a whole number and a counter past the first `COUNTERS_MAX` are left out."""
    if not isinstance(raw, dict):
        return {}
    named = [(k, v) for k, v in raw.items() if isinstance(k, str) and len(k) <= COUNTER_NAME_MAX and isinstance(v, int)]
    return dict(named[:COUNTERS_MAX])


_JSON_TYPES = {list: "array", str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}


def _raised(name: str, message: str) -> ChildRaised:
    """An exception named after the child's (`ai.AI_APICallError`), so the record says what the child raised."""
    module, _, short = name.rpartition(".")
    short = short if short.isidentifier() else "Error"
    cls = type(short, (ChildRaised,), {"__module__": module or "child", "__qualname__": short})
    return cls(message)
