"""The pieces the `anthropic_tool_runner` runner hands the SDK's tool runner: the Guard's tools, and the delegate.

Both are `BetaFunctionTool`s. The runner calls a tool's function with the parsed input and sends its return value
back; a `ToolError` it raises becomes a result with `is_error: true`, any other `Exception` too
(anthropic/lib/tools/_beta_runner.py:853-874), while a `BaseException` such as looplab's `StopRun` ends the loop.
"""

from __future__ import annotations

import inspect
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import anthropic
from anthropic.lib.tools import BetaFunctionTool, ToolError

from looplab.adapters.contract.agents import Delegate
from looplab.adapters.session import RunSession
from looplab.shared_tools import Tool

#: A tool function sees only its input, not the `tool_use` id; the runner yields each reply before it runs the
#: reply's calls, in order, so one loop queues the ids per tool name for the Guard's records.
CallIds = defaultdict[str, deque[str]]


def guarded_tool(t: Tool, session: RunSession, call_ids: CallIds) -> BetaFunctionTool[Any]:
    """`t` with its own name, description and JSON schema, its body a call through the Guard."""

    def call(**args: Any) -> str:
        # `**args` keeps the SDK's argument validation a pass-through: invalid input reaches the Guard.
        ids = call_ids[t.name]
        record = session.tools.call(t.name, args, ids.popleft() if ids else None)
        if record.is_error:
            # The runner catches a ToolError and sends its content with `is_error: true`.
            raise ToolError(record.result)
        return record.result

    return BetaFunctionTool(call, name=t.name, description=t.description, input_schema=t.parameters)


def delegating_tool(
    delegate: Delegate, run: Callable[[str, str, Delegate | None, int | None], Any], cap: int | None
) -> BetaFunctionTool[Any]:
    """The delegate as a tool whose function runs a second tool runner: `run(system, task, delegate, cap)` with the
    delegate's instructions, the call's question, the delegate's own delegate (a nested tree: offered to it as it
    is offered to its parent) and its cap, returning that loop's last message; its text is the tool's result.

    The nested runner has its own `max_iterations` (`cap`, the session's `child_cap`; None: the SDK's default): a
    runner counts only the replies it asked for (`_iteration_count`, anthropic/lib/tools/_beta_runner.py:221, 556,
    740). At its cap it stops silently on a reply that still asks for tools; the parent is told so, as an error
    result.
    """

    def ask(**args: Any) -> str:
        try:
            question = delegate.question_in(args)
        except ValueError as bad:  # an observation for the model, as a Guard tool's bad arguments are
            raise ToolError(str(bad)) from None
        message = run(delegate.instructions, question, delegate.delegate, cap)
        if message is None or message.stop_reason == "tool_use":
            at = f" at max_iterations={cap}" if cap is not None else ""
            raise ToolError(f"{delegate.name} stopped{at} without an answer")
        return "".join(b.text for b in message.content if b.type == "text")

    return BetaFunctionTool(ask, name=delegate.name, description=delegate.description, input_schema=delegate.parameters)


def whole_history(client: anthropic.Anthropic) -> dict[str, Any]:
    """Send the whole history each turn where the SDK would otherwise continue a server-side thread.

    The message-thread beta (newer SDKs default to it) keeps state on the server, which OpenAI-compatible
    and local servers, the scripted model among them, do not; older SDKs have no such parameter.
    """
    return {"thread": False} if "thread" in inspect.signature(client.beta.messages.tool_runner).parameters else {}


def replies(runner: Iterable[Any], streamed: bool) -> Iterator[Any]:
    """Each reply the runner receives, as its message: with `stream=True` the runner yields each reply's
    `BetaMessageStream` instead, read to its end here (`get_final_message`) before the runner runs its tool calls."""
    for reply in runner:
        yield reply.get_final_message() if streamed else reply
