"""DSPy's pieces the `dspy` runner assembles: its ReAct agent, the Guard's tools as DSPy tools, and a delegate.

ReAct's tools are `dspy.Tool`s it calls with the arguments parsed from the reply's `next_tool_args`; an exception a
tool raises becomes the observation "Execution error in <tool>: ..." (dspy/predict/react.py:114-115), so looplab's
`StopRun` (a `BaseException`) is what ends the loop from inside a tool.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from looplab.adapters.runners._litellm import offline_price_map

offline_price_map()  # before DSPy imports LiteLLM, which would read its model price map from GitHub
import dspy  # noqa: E402

from looplab.adapters.contract.agents import Delegate  # noqa: E402
from looplab.adapters.session import RunSession  # noqa: E402
from looplab.shared_tools import Tool  # noqa: E402

#: The name ReAct gives the answer: no tool.
FINISH = "finish"


class _ReAct(dspy.ReAct):
    """DSPy's ReAct, except that a `finish` step's thought is the answer: no extract call restates it."""

    def _call_with_potential_trajectory_truncation(self, module: Any, trajectory: dict[str, Any], **inputs: Any) -> Any:
        last = len(trajectory) // 4 - 1  # each step: thought, tool_name, tool_args, observation
        if module is self.extract and trajectory.get(f"tool_name_{last}") == FINISH:
            return dspy.Prediction(answer=trajectory[f"thought_{last}"])
        return super()._call_with_potential_trajectory_truncation(module, trajectory, **inputs)


class _RawTool(dspy.Tool):
    """A `dspy.Tool` that passes the model's arguments on unchecked: the Guard validates them, as an observation."""

    def _validate_and_parse_args(self, **kwargs: Any) -> dict[str, Any]:
        return kwargs


def react_agent(tools: list[dspy.Tool], max_iters: int | None, *, system_prompt: str, given: str = "task") -> _ReAct:
    """The ReAct agent over `tools`, told `system_prompt` and that a `finish` step's thought is the answer; its one
    input field is `given`."""
    finish = "When you call finish, write your whole answer as that step's next_thought."
    signature = dspy.Signature(f"{given} -> answer", f"{system_prompt} {finish}")
    return _ReAct(signature, tools=tools, **({} if max_iters is None else {"max_iters": max_iters}))


def predict(agent: dspy.Module, stream: bool, **inputs: Any) -> dspy.Prediction:
    """`agent(**inputs)`, its LM calls streamed when `stream`: DSPy's own way, `dspy.streamify` (a sync generator
    here), which sets `settings.send_stream` so each call goes through the engine's `stream` and the pieces are put
    together into the same response (dspy/clients/execution.py:594-609); the Prediction comes last. A delegate's
    ReAct, run inside the parent's tool, inherits the setting: its calls stream too."""
    if not stream:
        return agent(**inputs)
    for value in dspy.streamify(agent, async_streaming=False)(**inputs):
        if isinstance(value, dspy.Prediction):
            return value
    raise RuntimeError("dspy.streamify ended without a Prediction")  # pragma: no cover - it always sends one


def guarded_tool(t: Tool, session: RunSession, ids: Iterator[int]) -> dspy.Tool:
    """`t` for DSPy; its body the Guard, with the arguments DSPy parsed from `next_tool_args` (a dict) as they are."""

    def call(**kwargs: Any) -> str:
        # DSPy gives tool calls no ids: number them, so a call has the same id in process and over MCP.
        return session.tools.call(t.name, kwargs, f"dspy-{next(ids)}").result  # DSPy has no is_error: the text says

    # DSPy lists a tool's arguments as name -> JSON schema.
    return _RawTool(call, name=t.name, desc=t.description, args=t.parameters.get("properties", {}))


def delegating_tool(
    delegate: Delegate, tools: list[dspy.Tool], max_iters: int | None, session: RunSession
) -> dspy.Tool:
    """The delegate as a `dspy.Tool` whose function runs a child ReAct (`question -> answer`, the delegate's
    instructions, the parent's tools, `max_iters` (the delegates' cap; None: ReAct's default), and its own delegate as
    a tool built the same way: a nested tree) on the LM of the caller's `dspy.context`, and returns its answer. The
    child counts its own iterations; the parent counts the call as one."""
    if delegate.delegate is not None:
        tools = [*tools, delegating_tool(delegate.delegate, tools, max_iters, session)]
    child = react_agent(tools, max_iters, system_prompt=delegate.instructions, given="question")

    def ask(question: str) -> str:
        try:
            return child(question=question).answer
        except Exception:
            if session.stop:  # a call the boundary refused, raised as the LM's error: the parent would only
                raise session.stop from None  # read it as an observation and ask again
            raise

    return dspy.Tool(ask, name=delegate.name, desc=delegate.description, args=delegate.parameters["properties"])
