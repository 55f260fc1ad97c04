"""A suite's tool host: the team's `tools.py` runs in a process of its own, never in looplab's.

`describe` starts a host that runs `tools.py` and says what it offers: each public function's name, description and
argument schema, or the one-line `TypeError` saying why it cannot be a tool. A run's calls of those tools
(`ToolSpec.tool`) go to the run's own host, started on the first such call. Each host runs the bytes looplab read
(and fingerprinted), sent over the protocol: what a host runs is what the results document names.

What holds for a host:

- **Confinement.** Started by `confine.start`: in the workspace root, with the environment allowlist test
  commands get (no provider key, no token), under the reaper (whatever it starts, `setsid` included, ends with
  it), inside the sandbox when the workspace has one. `python -I`: neither the workspace nor `PYTHON*`
  variables change what it imports.
- **Lifetime.** Its process group is one of the workspace's processes: a cancelled run (`Guard.halt`) ends it at
  once, and so does closing the workspace at the run's end. A host that ended (stopped at a deadline, crashed,
  exited) is started again on the next call. A host whose looplab is gone reads the end of its requests and
  exits (the reaper's `PR_SET_PDEATHSIG` ends it even when it is busy).
- **Time.** A call waits at most the `timeout_s` the Guard passes (the run's remaining time, at most
  `SUITE_TOOL_TIMEOUT_S`); a host still busy then is ended. Its start counts in its first call's time.
- **Size.** What a tool returns, and the message of what it raises, is cut in the host at
  `custom.SUITE_TOOL_MAX_CHARS`, the cut said in the text; a reply line longer than `MAX_REPLY_BYTES` ends the
  host.
- **Failures.** Whatever a tool raises (`SystemExit`, `KeyboardInterrupt` and `GeneratorExit` included) and the
  host's own end are error observations with the exception's type and message.

The protocol is JSON lines over the host's stdin and stdout. looplab sends `{"file": PATH, "source": BASE64}`;
the host answers `{"tools": [...]}`, or `{"error": "..."}` when the source does not run. Then, for each request
`{"tool": NAME, "args": {...}}`, one reply: `{"ok": TEXT}`, `{"refused": MESSAGE}` (a path the workspace refused)
or `{"error": "Type: message"}`. Before it runs `tools.py` the host keeps both pipes on descriptors of its own
and points its stdin at /dev/null and its stdout at its stderr (looplab's): a `print` in `tools.py` cannot reach
the protocol. It validates the arguments with the tool's own model, as the Guard does in process; the Guard only
checks that they are a JSON object. One call at a time per host: calls made in parallel wait for each other,
each within its own bound.
"""

from __future__ import annotations

import base64
import inspect
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
import traceback
import types
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from pydantic import BaseModel, ConfigDict, model_validator

from looplab.shared_tools import confine
from looplab.shared_tools.custom import cut, tool_from_function
from looplab.shared_tools.daemon import DaemonPool
from looplab.shared_tools.errors import LooplabException
from looplab.shared_tools.guard import Tool, ToolFailed, failure_text, parse_arguments
from looplab.shared_tools.workspace import PathRefused, ToolError, Workspace

__all__ = ["ToolHostError", "ToolSpec", "describe"]

#: Seconds a suite tool's call may take when the run sets no deadline (with one, the run's remaining time if less).
SUITE_TOOL_TIMEOUT_S = 600.0
#: Seconds loading a suite may take to run its tools.py and describe its tools.
DESCRIBE_TIMEOUT_S = 60.0
#: The longest reply line read from a host: a result of `SUITE_TOOL_MAX_CHARS` characters is at most 12 bytes a
#: character as ASCII JSON; a suite's whole description is what needs the room.
MAX_REPLY_BYTES = 4_000_000
#: Seconds to wait for a host that closed its pipe to exit, for its exit status.
ENDED_WAIT_S = 1.0
_MODULE = "looplab.shared_tools.tool_host"
#: The name tools.py runs under in its host (the functions it defines carry it as their `__module__`).
_TOOLS_MODULE = "looplab_suite_tools"
_READ_BYTES = 1 << 16


class _AnyArgs(BaseModel):
    """What the Guard validates a hosted tool's arguments with: any JSON object (its host validates it properly), but
    for `timeout_s`, the name the Guard passes the call's bound under (no suite tool takes it: `tool_from_function`)."""

    model_config = ConfigDict(extra="allow")

    @model_validator(mode="before")
    @classmethod
    def _not_the_bound(cls, data: Any) -> Any:
        if isinstance(data, dict) and "timeout_s" in data:
            raise ValueError("timeout_s is not an argument of this tool")
        return data


class ToolHostError(LooplabException):
    """A suite's tools.py cannot be described: one line naming the file (and the line, when one is at fault)."""


@dataclass(frozen=True)
class ToolsSource:
    """A suite's tools.py as looplab read it: its path (for messages) and the bytes its hosts run."""

    file: Path
    source: bytes = field(repr=False)


@dataclass(frozen=True)
class ToolSpec:
    """A suite's tool as its host described it: what the model is offered, and where its calls go."""

    tools: ToolsSource
    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=dict, hash=False)
    #: Why the function cannot be a tool (`tool_from_function`'s one-line `TypeError`), when it cannot.
    problem: str | None = None

    def tool(self, *, effect: bool = False) -> Tool:
        """The tool a run offers, each call run by the run's host; a function that cannot be one, its `TypeError`."""
        if self.problem is not None:
            raise TypeError(self.problem)
        call = _forwarder(self.tools, self.name)
        return Tool(self.name, call, self.description, _AnyArgs, effect, schema=self.parameters)


def _forwarder(tools: ToolsSource, name: str) -> Callable[..., str]:
    # A keyword-only `timeout_s`: the Guard passes the run's remaining time and calls it inline (`bounds_itself`).
    def call(ws: Workspace, /, *, timeout_s: float = SUITE_TOOL_TIMEOUT_S, **args: Any) -> str:
        return _host_of(ws, tools).call(ws, name, args, timeout_s)

    call.__name__ = call.__qualname__ = name
    return call


def host_command() -> list[str]:
    """The command that runs a host, before `confine` puts its wrappers around it."""
    return [sys.executable, "-I", "-m", _MODULE]


class _Ended(Exception):
    """The host's end of the pipes closed: it exited or was ended."""


#: Starts run hosts: a thread that lives as long as looplab, as the reaper's `PR_SET_PDEATHSIG` needs (a host
#: started on a thread a framework ends after one call would end with that thread).
_starter = DaemonPool("looplab-tool-host")


class _Process:
    """One running host (a confined process, the leader of its own process group) and its two pipes."""

    def __init__(self, ws: Workspace, ends: float, *, detached: bool) -> None:
        self.proc = _started(ws, ends) if detached else confine.start(ws, host_command(), **_PIPES)
        self._requests: IO[bytes] = self.proc.stdin  # type: ignore[assignment]
        self._replies: IO[bytes] = self.proc.stdout  # type: ignore[assignment]
        os.set_blocking(self._requests.fileno(), False)  # a write waits within the call's bound, never for ever
        self._buffer = bytearray()

    def hello(self, tools: ToolsSource, ends: float) -> dict[str, Any]:
        """Send the host tools.py's source; its description of the tools, or `{"error": ...}`."""
        self.send({"file": str(tools.file), "source": base64.b64encode(tools.source).decode("ascii")}, ends)
        return self.receive(ends)

    def send(self, message: dict[str, Any], ends: float) -> None:
        """Write one request line by `ends` (`time.monotonic()`); `TimeoutError` past it, `_Ended` if it is gone."""
        data = memoryview((json.dumps(message, ensure_ascii=True) + "\n").encode("ascii"))
        fd = self._requests.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        while data:
            left = ends - time.monotonic()
            if left <= 0:
                raise TimeoutError
            if not poller.poll(left * 1000):
                continue
            try:
                data = data[os.write(fd, data) :]
            except BlockingIOError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                raise _Ended from None

    def receive(self, ends: float) -> dict[str, Any]:
        """Read one reply line by `ends`; `TimeoutError` past it, `_Ended` at the pipe's end, `ToolFailed` for a
        reply too long or not a JSON object."""
        fd = self._replies.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        while (newline := self._buffer.find(b"\n")) < 0:
            if len(self._buffer) > MAX_REPLY_BYTES:
                raise ToolFailed(f"ToolHostError: the suite's tool host sent a reply over {MAX_REPLY_BYTES} bytes")
            left = ends - time.monotonic()
            if left <= 0:
                raise TimeoutError
            if not poller.poll(left * 1000):
                continue
            chunk = os.read(fd, _READ_BYTES)
            if not chunk:
                raise _Ended
            self._buffer += chunk
        line = bytes(self._buffer[:newline])
        del self._buffer[: newline + 1]
        try:
            reply = json.loads(line)
        except ValueError:
            reply = None
        if not isinstance(reply, dict):
            raise ToolFailed("ToolHostError: the suite's tool host sent a reply that is not a JSON object")
        return reply

    def end(self, ws: Workspace, wait_s: float = 0.0) -> str:
        """Wait up to `wait_s` for the host to exit on its own, then end it with all it started; how it ended."""
        try:
            code: int | None = self.proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            code = None
        stopped = confine.stop(ws, self.proc)
        for pipe in (self._requests, self._replies):
            pipe.close()
        code = stopped if code is None else code
        if code is None:
            return "did not end"
        if code < 0:
            return f"was killed by {signal.Signals(-code).name}" if -code in signal.valid_signals() else "was killed"
        return f"exited with code {code}"


#: The host's stdin and stdout are the protocol's pipes; its stderr is looplab's.
_PIPES: dict[str, Any] = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE}


def _started(ws: Workspace, ends: float) -> subprocess.Popen[Any]:
    """`confine.start` of a host, on `_starter`'s thread; by `ends`, else `TimeoutError`."""
    done = threading.Event()
    out: list[Any] = []

    def start() -> None:
        try:
            out.append(confine.start(ws, host_command(), **_PIPES))
        except BaseException as exc:  # handed to the waiting caller
            out.append(exc)
        done.set()

    _starter.submit(start)
    if not done.wait(max(0.0, ends - time.monotonic())):
        raise TimeoutError  # the host, once started, is one of the workspace's processes: it ends with it
    if isinstance(out[0], BaseException):
        raise out[0]
    return out[0]


class ToolHost:
    """The tool host of one workspace for one tools.py: started on its first call, and again after it ended."""

    def __init__(self, tools: ToolsSource) -> None:
        # Not the workspace: the registry below holds hosts by workspace, weakly; each call brings it.
        self._tools = tools
        self._lock = threading.Lock()
        self._process: _Process | None = None

    def call(self, ws: Workspace, name: str, args: dict[str, Any], timeout_s: float) -> str:
        """Run tool `name` with `args` in `ws`'s host within `timeout_s`; its text, or the failure as an exception
        the Guard turns into an observation (`ToolFailed`, `PathRefused`, `TimeoutError`)."""
        ends = time.monotonic() + timeout_s
        if not self._lock.acquire(timeout=max(0.0, timeout_s)):
            raise TimeoutError(f"{name} waited {timeout_s:g}s for the suite's tool host, busy with another call")
        try:
            reply = self._exchange(ws, name, args, ends, timeout_s)
        finally:
            self._lock.release()
        if isinstance(text := reply.get("ok"), str):
            return text
        if isinstance(message := reply.get("refused"), str):
            raise PathRefused(message)
        if isinstance(message := reply.get("error"), str):
            raise ToolFailed(message)
        raise ToolFailed("ToolHostError: the suite's tool host sent a reply of no known kind")

    def _exchange(self, ws: Workspace, name: str, args: dict[str, Any], ends: float, timeout_s: float) -> Any:
        try:
            process = self._process or self._start(ws, ends)
            process.send({"tool": name, "args": args}, ends)
            return process.receive(ends)
        except TimeoutError:
            self._end(ws)
            raise TimeoutError(
                f"{name} did not finish within {timeout_s:g}s; the suite's tool host was ended "
                "(it starts again on the next call)"
            ) from None
        except _Ended:
            how = self._end(ws, ENDED_WAIT_S)
            raise ToolFailed(
                f"ToolHostEnded: the suite's tool host {how} while {name} ran; it starts again on the next call"
            ) from None
        except ToolFailed:
            self._end(ws)
            raise

    def _start(self, ws: Workspace, ends: float) -> _Process:
        try:
            self._process = process = _Process(ws, ends, detached=True)
        except ToolError as exc:  # it could not start (no sandbox here, no interpreter)
            raise ToolFailed(f"ToolHostError: the suite's tool host did not start: {exc}") from None
        hello = process.hello(self._tools, ends)
        if isinstance(error := hello.get("error"), str):
            raise ToolFailed(f"ToolHostError: {error}")
        return process

    def _end(self, ws: Workspace, wait_s: float = 0.0) -> str:
        process, self._process = self._process, None
        return "ended" if process is None else process.end(ws, wait_s)


#: Each open workspace's hosts, by tools.py; gone with the workspace, whose `processes` end the hosts themselves.
_hosts: weakref.WeakKeyDictionary[Workspace, dict[ToolsSource, ToolHost]] = weakref.WeakKeyDictionary()
_hosts_lock = threading.Lock()


def _host_of(ws: Workspace, tools: ToolsSource) -> ToolHost:
    with _hosts_lock:
        hosts = _hosts.setdefault(ws, {})
        if tools not in hosts:
            hosts[tools] = ToolHost(tools)
        return hosts[tools]


def describe(file: Path, source: bytes, *, sandbox: bool = False) -> dict[str, ToolSpec]:
    """The tools a suite's tools.py (`file`, as read: `source`) offers, by name, as a host of its own runs it in the
    suite's folder and describes them; `sandbox`: that host runs in the sandbox, as the run's own hosts do.

    A source that does not run (or whose host cannot start or answer within `DESCRIBE_TIMEOUT_S`) is a one-line
    `ToolHostError` naming the file, and the line where it failed.
    """
    tools = ToolsSource(Path(file).resolve(), source)
    folder = Workspace.in_place(tools.file.parent, sandbox=sandbox)
    ends = time.monotonic() + DESCRIBE_TIMEOUT_S
    process = None
    try:
        process = _Process(folder, ends, detached=False)
        hello = process.hello(tools, ends)
    except ToolError as exc:
        raise ToolHostError(f"{tools.file}: its tool host did not start: {exc}") from None
    except TimeoutError:
        raise ToolHostError(f"{tools.file}: running it took over {DESCRIBE_TIMEOUT_S:g}s") from None
    except _Ended:
        how, process = process.end(folder, ENDED_WAIT_S) if process else "ended", None
        raise ToolHostError(f"{tools.file}: running it ended its process ({how})") from None
    except ToolFailed as exc:
        raise ToolHostError(f"{tools.file}: {exc}") from None
    finally:
        if process is not None:
            process.end(folder)
    if isinstance(error := hello.get("error"), str):
        raise ToolHostError(error)
    try:
        return {spec["name"]: ToolSpec(tools, **spec) for spec in hello["tools"]}
    except (KeyError, TypeError):
        raise ToolHostError(f"{tools.file}: its tool host described its tools in a form looplab cannot read") from None


# --- the host's side -------------------------------------------------------------------------------------------


def _tools_in(file: Path, source: bytes) -> dict[str, Tool | str]:
    """The public functions `source` (tools.py, read from `file`) defines, not those it imports, as tools by name, or
    why one cannot be a tool; a source that does not run is a one-line `ToolHostError` with the line at fault."""
    module = types.ModuleType(_TOOLS_MODULE)
    module.__file__ = str(file)
    sys.modules[_TOOLS_MODULE] = module  # typing.get_type_hints resolves the functions' annotations through it
    try:
        exec(compile(source, str(file), "exec", dont_inherit=True), module.__dict__)  # noqa: S102 - the suite's tools
    except BaseException as exc:  # the suite's own code: whatever it raises is its author's to read, in one line
        line = f" (line {n})" if (n := _line_in(exc, file)) else ""
        raise ToolHostError(cut(f"{file}{line}: importing it failed: {failure_text(exc)}")) from None
    tools: dict[str, Tool | str] = {}
    for name, fn in vars(module).items():
        if inspect.isfunction(fn) and fn.__module__ == _TOOLS_MODULE and not name.startswith("_"):
            try:
                tools[name] = tool_from_function(fn)
            except TypeError as exc:
                tools[name] = str(exc)
    return tools


def _line_in(exc: BaseException, path: Path) -> int | None:
    """The line of `path` where `exc` was raised (a SyntaxError carries its own)."""
    if isinstance(exc, SyntaxError):
        return exc.lineno
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == path]
    return frames[-1].lineno if frames else None


def _described(name: str, tool: Tool | str) -> dict[str, Any]:
    if isinstance(tool, str):
        return {"name": name, "problem": tool}
    return {"name": name, "description": tool.description, "parameters": tool.parameters}


def _answer(tools: dict[str, Tool | str], ws: Workspace, line: bytes) -> dict[str, str]:
    """The reply to one request line."""
    try:
        request = json.loads(line)
        name, args = request["tool"], request["args"]
        tool = tools.get(name)
    except (ValueError, KeyError, TypeError) as exc:
        return {"error": f"ToolHostError: a request it cannot read ({type(exc).__name__})"}
    if tool is None:
        return {"error": f"UnknownTool: the suite's tools.py defines no tool named {name!r}"}
    if isinstance(tool, str):
        return {"error": f"TypeError: {tool}"}
    parsed, problem = parse_arguments(tool, args)  # the Guard's own validation, with the tool's own model
    if problem is not None or parsed is None:
        return {"error": problem or f"InvalidArguments: {name}"}
    try:
        return {"ok": tool.fn(ws, **parsed)}  # cut at SUITE_TOOL_MAX_CHARS by the tool itself (custom.py)
    except PathRefused as exc:
        return {"refused": cut(str(exc))}
    except BaseException as exc:  # the team's code: whatever it raises, SystemExit included, is an observation
        return {"error": cut(failure_text(exc))}


def main() -> int:
    """Run as a host (`python -m looplab.shared_tools.tool_host`, in the folder its tools work in): read tools.py's
    source, describe its tools, then answer one request a line until the requests end."""
    # The protocol keeps the pipes; the team's print() and input() get stderr and /dev/null.
    requests = os.fdopen(os.dup(0), "rb")
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr] # a print shows as it is made, not at exit
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)

    def reply(message: dict[str, Any]) -> None:
        replies.write(json.dumps(message, ensure_ascii=True).encode("ascii") + b"\n")
        replies.flush()

    try:
        first = json.loads(requests.readline() or b"null")
        file, source = Path(first["file"]), base64.b64decode(first["source"])
        tools = _tools_in(file, source)
    except ToolHostError as exc:
        reply({"error": str(exc)})
        return 1
    except (ValueError, KeyError, TypeError) as exc:
        reply({"error": f"the tool host was not sent a tools.py it can read ({type(exc).__name__})"})
        return 1
    reply({"tools": [_described(name, tool) for name, tool in tools.items()]})
    ws = Workspace.in_place(Path.cwd())
    while line := requests.readline():  # its end: looplab closed the pipe, or is gone
        reply(_answer(tools, ws, line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
