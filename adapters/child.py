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
| `LOOPLAB_API` | `chat`, `responses` or `messages`: the wire API to speak |
| `LOOPLAB_OPENAI_BASE_URL` | the proxy, as an OpenAI SDK's base URL (ends in `/v1`) |
| `LOOPLAB_ANTHROPIC_BASE_URL` | the proxy, as an Anthropic SDK's base URL |
| `LOOPLAB_TOKEN` | the run's token: the API key for the proxy, and `Authorization: Bearer` for the tool server |
| `LOOPLAB_TOOLS_URL` | the run's tools, as an MCP streamable HTTP endpoint |
| `LOOPLAB_CAP_KNOB`, `LOOPLAB_CAP` | the native cap to set and its value (empty: leave the framework's default) |
| `LOOPLAB_MAX_SECONDS` | the run's wall-clock budget |
| `LOOPLAB_RETRIES` | retries of a failed model request the program's SDK should make (looplab's `--retries`) |
| `LOOPLAB_RESULT` | a file to write the outcome to, as JSON |

The outcome file holds `{"text": ..., "ended": "returned" | "raised", "exception": ..., "message": ...}`:
the final text if the loop returned one, or the exception's name and message if it raised. A
child that writes none (it crashed, or was killed at its bound) ends the run as `error`, with the
tail of its stderr; the boundaries decide the stop either way, as for every runner.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import tempfile
from abc import abstractmethod
from pathlib import Path
from typing import Any

from adapters.base import Adapter, Finished, NativeEnd, RunSession
from adapters.proxy import ModelProxy
from adapters.tool_server import ToolServer

#: Variables of looplab's own environment a child may see (never a provider key).
CHILD_ENV_ALLOWED = ("PATH", "HOME", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "SYSTEMROOT")
#: Seconds a child gets past the run's `max_seconds` to write its outcome before its process group is killed.
CHILD_GRACE_S = 10.0
#: Lines of a child's stderr kept in the run's warnings.
STDERR_LINES = 20


class ChildRaised(Exception):
    """The child's loop raised; subclasses are named after its exception (see `_raised`)."""


class ChildFailed(Exception):
    """The child wrote no outcome: it crashed, or was killed at its bound."""


def child_environment(**contract: str) -> dict[str, str]:
    """The allowlisted part of looplab's environment, plus the contract's `LOOPLAB_*` variables."""
    env = {k: v for k, v in os.environ.items() if k in CHILD_ENV_ALLOWED}
    return env | {f"LOOPLAB_{k.upper()}": v for k, v in contract.items()}


class ChildRunner(Adapter):
    """A runner whose loop is another program; subclasses say which command starts it."""

    out_of_process = True

    @abstractmethod
    def command(self, session: RunSession) -> list[str]:
        """The program to start for this run (it reads the contract from its environment)."""

    def workdir(self) -> Path | None:
        """Where the program runs (None: a fresh temporary folder)."""
        return None

    def loop(self, task: str, session: RunSession) -> Finished:
        api = self.api_for(session.model)
        command = self.command(session)
        with tempfile.TemporaryDirectory(prefix="looplab-child-") as tmp, ModelProxy(session) as proxy:
            with ToolServer(session.guard, token=proxy.token) as tools:
                session.tool_transport = "mcp"
                outcome = Path(tmp) / "outcome.json"
                env = child_environment(
                    task=task,
                    system_prompt=session.system_prompt,
                    model=session.model.name,
                    api=api,
                    openai_base_url=proxy.openai_base_url,
                    anthropic_base_url=proxy.anthropic_base_url,
                    token=proxy.token,
                    tools_url=tools.url,
                    cap_knob=session.knob,
                    cap="" if session.cap is None else str(session.cap),
                    max_seconds=f"{session.limits.max_seconds:g}",
                    retries=str(session.model.retries),
                    result=str(outcome),
                )
                code, stderr = run_bounded(command, env, self.workdir() or Path(tmp), session.remaining_s())
                data = _read(outcome)
        for line in stderr[-STDERR_LINES:]:
            logging.getLogger(f"{self.name} stderr").warning(line)
        if data is None:
            tail = " | ".join(stderr[-3:]) or "no output"
            return session.conclude(None, ChildFailed(f"the runner process exited {code} without an outcome: {tail}"))
        if data.get("ended") == "raised":
            name = str(data.get("exception") or "Error")
            if session.stop is not None:  # what it raised was the proxy's refusal: say so, as in-process, and how
                refused = "refused by the model boundary"
                session.native_end = NativeEnd(kind=refused, exception=name, message=session.stop.detail)
            error = _raised(name, str(data.get("message") or ""))
            return session.conclude(None, error)
        text = data.get("text")
        return session.conclude(text if isinstance(text, str) else None)


def kill_group(proc: subprocess.Popen[Any]) -> None:
    """Kill the process group `proc` leads (started with `start_new_session=True`) and reap it, within a bound."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


def run_bounded(command: list[str], env: dict[str, str], cwd: Path, seconds: float) -> tuple[int | None, list[str]]:
    """Run `command` to its end or `seconds` + the grace, whichever comes first; its exit code and stderr lines.

    It runs in its own process group, killed whole at the bound (a child's own children included).
    """
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            command, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=err, stderr=err, start_new_session=True
        )
        try:
            code: int | None = proc.wait(timeout=seconds + CHILD_GRACE_S)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            kill_group(proc)  # whatever it left running
        err.seek(0)
        text = err.read()[-64_000:].decode("utf-8", errors="replace")
    return code, [line for line in text.splitlines() if line.strip()]


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _raised(name: str, message: str) -> ChildRaised:
    """An exception named after the child's (`ai.AI_APICallError`), so the record says what the child raised."""
    module, _, short = name.rpartition(".")
    short = short if short.isidentifier() else "Error"
    cls = type(short, (ChildRaised,), {"__module__": module or "child", "__qualname__": short})
    return cls(message)
