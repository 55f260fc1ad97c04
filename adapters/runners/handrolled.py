"""The ReAct loop written by hand: `for step in range(max_steps)`, the stop reason decides.

On the Anthropic SDK (Messages API) by default, or on the OpenAI SDK (Chat
Completions) when the model's provider is `openai`, which also reaches any
OpenAI-compatible server. Replies come whole, or streamed with `--stream on` (the SDK's own stream
helpers, which put the same message together). A case's delegate is a tool of the loop's whose call runs
the same loop again, nested, on the delegate's question (`_handrolled.tool_answers`).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable
from typing import Any

try:  # either SDK may be missing; the loop that needs it says which extra to install
    import anthropic
except ImportError:  # pragma: no cover - depends on the extras installed
    anthropic = None  # type: ignore[assignment]
try:
    import openai
except ImportError:  # pragma: no cover
    openai = None  # type: ignore[assignment]

from looplab.adapters.contract.agents import Delegate
from looplab.adapters.contract.bare import BareRun
from looplab.adapters.contract.errors import MissingExtra
from looplab.adapters.contract.limits import Limits
from looplab.adapters.contract.model import MESSAGES_MAX_TOKENS, ModelSpec
from looplab.adapters.contract.result import Finished, NativeCap
from looplab.adapters.contract.runner import KnobDefault, installed_version
from looplab.adapters.runners._handrolled import Ending, bare_run, offered, run_tree, tool_answers
from looplab.adapters.session import Runner, RunSession

__all__ = ["RUNNER"]


class HandRolled(Runner):
    name = "handrolled"
    summary = "hand-written loop on the Anthropic SDK (or the OpenAI SDK with an openai: model)"
    requires = ("anthropic",)
    extras = ("anthropic", "openai")
    listed = 0
    extra = "anthropic"
    distribution = "anthropic"
    apis = ("messages", "chat")
    streams = (False, True)
    knobs = ("for step in range(max_steps)",)
    delegation = "a tool named after the delegate runs the same loop nested: its own range(max_steps) counter"

    def version(self, model: ModelSpec | None = None) -> str:
        sdk = "openai" if model and model.provider == "openai" else "anthropic"
        version = installed_version(sdk)
        return f"{sdk} {version}" if version != "not installed" else version

    def native_cap(self, limits: Limits) -> NativeCap:
        return NativeCap(knob=self.knobs[0], value=limits.max_steps)

    def knob_defaults(self) -> dict[str, KnobDefault]:
        return {self.knobs[0]: KnobDefault(value=None, source="written by hand: there is no default")}

    def loop(self, task: str, session: RunSession) -> Finished:
        if self.api_for(session.model) == "chat":
            if openai is None:
                raise MissingExtra(self.name, "openai", "openai")
            client = session.openai_client(is_async=False)
            return run_tree(session, functools.partial(self._openai_loop, session, client), task)
        if anthropic is None:
            raise MissingExtra(self.name, "anthropic", "anthropic")
        client = session.anthropic_client(is_async=False)
        return run_tree(session, functools.partial(self._anthropic_loop, session, client), task)

    def _anthropic_loop(
        self, session: RunSession, client: Any, system: str, task: str, delegate: Delegate | None, child: bool
    ) -> Ending:
        tools = [{"name": n, "description": d, "input_schema": p} for n, d, p in offered(session, delegate)]
        answer = tool_answers(session, delegate, functools.partial(self._anthropic_loop, session, client))
        messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
        for _ in _steps(session, child):
            if stop := session.budget_stop():
                return Finished.stopped(stop)
            ask = {"model": session.model.name, "system": system, "tools": tools, "messages": messages}
            reply = _anthropic_reply(client, session, **ask, max_tokens=MESSAGES_MAX_TOKENS)
            # As plain dicts: a model may send tool input that is not an object, which the SDK's types warn about.
            content = [block.model_dump(mode="json", exclude_none=True, warnings=False) for block in reply.content]
            messages.append({"role": "assistant", "content": content})
            if reply.stop_reason != "tool_use":
                return "".join(b.text for b in reply.content if b.type == "text")
            calls = [b for b in reply.content if b.type == "tool_use"]
            answers = [answer(b.name, b.input, b.id) for b in calls]  # one at a time, in order
            results = [
                {"type": "tool_result", "tool_use_id": b.id, "content": text, "is_error": is_error}
                for b, (text, is_error) in zip(calls, answers, strict=True)
            ]
            messages.append({"role": "user", "content": results})
            if stop := session.tool_stop():
                return Finished.stopped(stop)
        return None

    def _openai_loop(
        self, session: RunSession, client: Any, system: str, task: str, delegate: Delegate | None, child: bool
    ) -> Ending:
        tools = [
            {"type": "function", "function": {"name": n, "description": d, "parameters": p}}
            for n, d, p in offered(session, delegate)
        ]
        answer = tool_answers(session, delegate, functools.partial(self._openai_loop, session, client))
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}, {"role": "user", "content": task}]
        for _ in _steps(session, child):
            if stop := session.budget_stop():
                return Finished.stopped(stop)
            reply = _chat_reply(client, session, model=session.model.name, messages=messages, tools=tools)
            message = reply.choices[0].message
            messages.append(message.model_dump(include={"role", "content", "tool_calls"}, exclude_none=True))
            if not message.tool_calls:
                return message.content
            for call in message.tool_calls:
                text, _ = answer(call.function.name, call.function.arguments, call.id)
                # Chat Completions has no is_error field: the observation text says it.
                messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
            if stop := session.tool_stop():
                return Finished.stopped(stop)
        return None

    def bare_loop(self) -> BareRun:
        return bare_run


def _anthropic_reply(client: Any, session: RunSession, **ask: Any) -> Any:
    """One Messages call, whole or streamed (`session.model.stream`): the same message either way."""
    if session.model.stream:
        with client.messages.stream(**ask, timeout=session.remaining_s()) as stream:
            return stream.get_final_message()
    return client.messages.create(**ask, timeout=session.remaining_s())


def _chat_reply(client: Any, session: RunSession, **ask: Any) -> Any:
    """One Chat Completions call, whole or streamed (with the usage chunk the stream leaves out unless asked)."""
    if session.model.stream:
        streamed = {"stream_options": {"include_usage": True}}
        with client.chat.completions.stream(**ask, **streamed, timeout=session.remaining_s()) as stream:
            return stream.get_final_completion()
    return client.chat.completions.create(**ask, timeout=session.remaining_s())


def _steps(session: RunSession, child: bool) -> Iterable[int]:
    """A fresh counter for each loop: the run's counts to `session.cap`; a delegate's nested loop (`child`) counts
    its own steps, to `session.child_cap`."""
    if child:
        return range(session.child_cap) if session.child_cap is not None else itertools.count()
    # cap:begin
    return range(session.cap) if session.cap is not None else itertools.count()
    # cap:end


RUNNER = HandRolled()
