"""The pieces the `handrolled` runner's loops share (the tools they offer, the delegate as one), and its bare loop.

A case's delegate is a tool named after it; its call runs the same hand-written loop again, nested, with the
delegate's instructions as the system prompt, the question as the task, the run's tools and the delegate's own
delegate if it has one (a nested tree), a step counter of its own, and answers with the nested loop's final text.
Every loop's model calls go through the session's one client, so the run's limits count them together.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from looplab.adapters.boundary.plain import plain_http_client
from looplab.adapters.contract.agents import Delegate
from looplab.adapters.contract.bare import BareTool
from looplab.adapters.contract.errors import LooplabSignal
from looplab.adapters.contract.model import MESSAGES_MAX_TOKENS
from looplab.adapters.contract.result import Finished
from looplab.adapters.session import RunSession

#: How one loop ended: a boundary stopped it (a `Finished`), the model answered (its text), or its steps ran out.
Ending = Finished | str | None
#: One loop on the run's client: (system prompt, task, the delegate it may hand work to, whether it is a delegate's
#: loop rather than the run's: its step counter's bound) -> how it ended.
Loop = Callable[[str, str, Delegate | None, bool], Ending]
#: What answers one tool call: (name, arguments as the model sent them, call id) -> (result text, is_error).
Answer = Callable[[str, Any, str], tuple[str, bool]]


class _DelegateStopped(LooplabSignal):
    """A boundary's stop inside the delegate's loop: it ends the whole run, as it ends the parent's own loop."""

    def __init__(self, finished: Finished) -> None:
        super().__init__(finished.detail)
        self.finished = finished


def run_tree(session: RunSession, loop: Loop, task: str) -> Finished:
    """The run's loop on `task`, offered the case's delegate if it has one; the session concludes from its end."""
    try:
        ended = loop(session.system_prompt, task, session.delegate, False)
    except _DelegateStopped as stopped:
        return stopped.finished
    return ended if isinstance(ended, Finished) else session.conclude(ended)


def offered(session: RunSession, delegate: Delegate | None) -> list[tuple[str, str, dict[str, Any]]]:
    """The tools a loop offers, as (name, description, JSON schema): the run's, and the delegate if it has one."""
    tools = [(t.name, t.description, t.parameters) for t in session.tools.tools]
    return tools if delegate is None else [*tools, (delegate.name, delegate.description, delegate.parameters)]


def tool_answers(session: RunSession, delegate: Delegate | None, loop: Loop) -> Answer:
    """What answers a loop's tool calls: the Guard, or for the delegate's tool, `loop` run nested on its question."""

    def answer(name: str, args: Any, call_id: str) -> tuple[str, bool]:
        if delegate is None or name != delegate.name:
            record = session.tools.call(name, args, call_id)
            return record.result, record.is_error
        try:
            question = delegate.question_in(args)
        except ValueError as bad:  # an observation for the model, as a Guard tool's bad arguments are
            return str(bad), True
        # Its own delegate, never itself; a delegate's loop, so its own counter counts to `session.child_cap`.
        ended = loop(delegate.instructions, question, delegate.delegate, True)
        if isinstance(ended, Finished):
            raise _DelegateStopped(ended)
        if not ended:  # its own counter ran out (unreachable while it is the run's max_steps), or an empty reply
            return f"{delegate.name} stopped without an answer", True
        return ended, False

    return answer


def bare_run(
    task: str, tools: Sequence[BareTool], urls: dict[str, str], model: str, max_steps: int, *, system_prompt: str
) -> int:
    """The runner's Messages loop with none of looplab's boundaries: plain client, plain tool functions."""
    import anthropic  # the runner's loop says which extra to install when it is missing

    url = urls["anthropic"]
    fns = {t.name: t.fn for t in tools}
    defs = [{"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools]
    messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
    with anthropic.Anthropic(
        api_key="not-needed", base_url=url, http_client=plain_http_client(anthropic, url)
    ) as client:
        for step in range(1, max_steps + 1):
            reply = client.messages.create(
                model=model, max_tokens=MESSAGES_MAX_TOKENS, system=system_prompt, tools=defs, messages=messages
            )
            content = [block.model_dump(mode="json", exclude_none=True, warnings=False) for block in reply.content]
            messages.append({"role": "assistant", "content": content})
            if reply.stop_reason != "tool_use":
                return step
            calls = [b for b in reply.content if b.type == "tool_use"]
            results = [{"type": "tool_result", "tool_use_id": b.id, "content": fns[b.name](**b.input)} for b in calls]
            messages.append({"role": "user", "content": results})
    return max_steps
