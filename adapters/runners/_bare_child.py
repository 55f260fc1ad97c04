"""The bare loop of a runner in another process: the same program with none of looplab's boundaries.

The program gets the contract of `_child.py` unchanged but for where it points: its model base URLs are the
model server's own (no recording proxy), and its tools are the plain `BareTool`s, served over MCP streamable
HTTP by the same tool server a run uses, from a stand-in for the Guard that calls the function and nothing
else (no records, checks, approval or deadline). The tool server's token is the run's token, as in a run: the
Bearer credential for the tools and the API key the program sends the model. The cap is the runner's first
knob set to `max_steps`, as a run sets it.

Nothing of looplab's sits between the program and the model, so the program's command counts its own
model requests: whatever it runs with must write, when it ends, the number of model requests that were
answered to the file `LOOPLAB_BARE_COUNT` names (a Node program gets `ts/count_model_requests.mjs` for that).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from looplab.adapters.boundary.processes import child_environment, run_bounded, scratch_folder
from looplab.adapters.boundary.tool_server import ToolServer, require_mcp
from looplab.adapters.contract import files
from looplab.adapters.contract.bare import BareTool
from looplab.adapters.contract.errors import ChildFailed
from looplab.adapters.contract.model import DEFAULT_RETRIES
from looplab.adapters.runners import _child

#: The bound on one bare run, the program's own (`LOOPLAB_MAX_SECONDS`) and the process's.
BARE_SECONDS = 300.0
#: The variable naming the file the command writes its count of answered model requests to.
COUNT_ENV = "LOOPLAB_BARE_COUNT"
#: The most a count file is read of (a number).
COUNT_MAX_BYTES = 64


class ToolAnswer(NamedTuple):
    """What the tool server reads of a call's record: its text, and whether it failed."""

    result: str
    is_error: bool


class PlainTools:
    """What the tool server needs of a Guard (`tools` and `call`), over plain tools: a call runs the function."""

    def __init__(self, tools: Sequence[BareTool]) -> None:
        self.tools = list(tools)
        self._functions = {t.name: t.fn for t in tools}

    def call(self, name: str, arguments: dict[str, Any], call_id: str) -> ToolAnswer:
        """`name`'s function on `arguments` (a `BareTool` answers its failure as text); an unknown name is an error."""
        function = self._functions.get(name)
        if function is None:
            return ToolAnswer(f"unknown tool {name!r}", is_error=True)
        return ToolAnswer(function(**arguments), is_error=False)


def bare_run(
    runner: _child.ChildRunner,
    command: Callable[[], list[str]],
    task: str,
    tools: Sequence[BareTool],
    urls: dict[str, str],
    model: str,
    max_steps: int,
    *,
    system_prompt: str,
) -> int:
    """Run the command `command()` gives (`runner`'s program, counting its model requests; made within the run, as
    `run()` makes its own) once as the module docstring says.

    Returns the model requests answered. A program that ends without an outcome or a count, or that raised
    before its cap, is a `ChildFailed` with the tail of its output: a bare loop that failed measures nothing.
    """
    require_mcp()
    with scratch_folder() as tmp, ToolServer(PlainTools(tools)) as server:  # type: ignore[arg-type]
        outcome, count = tmp / "outcome.json", tmp / "model-requests"
        env = child_environment(
            task=task,
            system_prompt=system_prompt,
            model=model,
            api=runner.apis[0],
            openai_base_url=urls.get("openai", ""),
            anthropic_base_url=urls.get("anthropic", ""),
            gemini_base_url=urls.get("google", ""),
            token=server.token,
            tools_url=server.url,
            cap_knob=runner.knobs[0],
            cap=str(max_steps),
            max_seconds=f"{BARE_SECONDS:g}",
            retries=str(DEFAULT_RETRIES),
            result=str(outcome),
        ) | {COUNT_ENV: str(count)}
        code, output = run_bounded(command(), env, runner.workdir() or tmp, BARE_SECONDS)
        data = _child._read(outcome)  # the contract's reading of an outcome
        requests = _read_count(count)
    tail = " | ".join(output[-3:]) or "no output"
    if data is None or requests is None:
        missing = "an outcome" if data is None else "a count of its model requests"
        raise ChildFailed(f"the bare loop of {runner.name} exited {code} without {missing}: {tail}")
    if data.get("ended") == "raised" and requests < max_steps:  # at the cap, some frameworks raise (the Agents SDK)
        raised = f"{data.get('exception') or 'Error'}: {data.get('message') or ''}"
        raise ChildFailed(f"the bare loop of {runner.name} raised after {requests} model requests: {raised}")
    return requests


def _read_count(path: Path) -> int | None:
    """The count the command wrote (None: it wrote none, or not a number)."""
    try:
        text = files.read_bytes(path, limit=COUNT_MAX_BYTES, follow_links=False).decode("ascii").strip()
    except (files.FileRefused, OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None
