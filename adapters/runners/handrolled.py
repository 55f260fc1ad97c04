"""The ReAct loop written by hand: `for step in range(max_steps)`, the stop reason decides.

On the Anthropic SDK (Messages API) by default, or on the OpenAI SDK (Chat
Completions) when the model's provider is `openai`, which also reaches any
OpenAI-compatible server.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import Any

try:  # either SDK may be missing; the loop that needs it says which extra to install
    import anthropic
except ImportError:  # pragma: no cover - depends on the extras installed
    anthropic = None  # type: ignore[assignment]
try:
    import openai
except ImportError:  # pragma: no cover
    openai = None  # type: ignore[assignment]

from looplab.adapters.boundary.plain import plain_http_client
from looplab.adapters.contract.bare import BareRun, BareTool
from looplab.adapters.contract.errors import MissingExtra
from looplab.adapters.contract.limits import Limits
from looplab.adapters.contract.model import MESSAGES_MAX_TOKENS, ModelSpec
from looplab.adapters.contract.result import Finished, NativeCap
from looplab.adapters.contract.runner import KnobDefault, installed_version
from looplab.adapters.session import Adapter, RunSession

__all__ = ["ADAPTER", "HandRolled", "bare_run"]


class HandRolled(Adapter):
    name = "handrolled"
    summary = "hand-written loop on the Anthropic SDK (or the OpenAI SDK with an openai: model)"
    requires = ("anthropic",)
    extras = ("anthropic", "openai")
    listed = 0
    extra = "anthropic"
    distribution = "anthropic"
    apis = ("messages", "chat")
    knobs = ("for step in range(max_steps)",)

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
            return self._openai_loop(task, session)
        if anthropic is None:
            raise MissingExtra(self.name, "anthropic", "anthropic")
        return self._anthropic_loop(task, session)

    def _anthropic_loop(self, task: str, session: RunSession) -> Finished:
        model = session.model
        client = session.anthropic_client(is_async=False)
        tools = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in session.tools.tools
        ]
        messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
        for _ in _steps(session):
            if stop := session.budget_stop():
                return Finished.stopped(stop)
            reply = client.messages.create(
                model=model.name,
                max_tokens=MESSAGES_MAX_TOKENS,
                system=session.system_prompt,
                tools=tools,
                messages=messages,
                timeout=session.remaining_s(),
            )
            # As plain dicts: a model may send tool input that is not an object, which the SDK's types warn about.
            content = [block.model_dump(mode="json", exclude_none=True, warnings=False) for block in reply.content]
            messages.append({"role": "assistant", "content": content})
            if reply.stop_reason != "tool_use":
                return session.conclude("".join(b.text for b in reply.content if b.type == "text"))
            calls = [b for b in reply.content if b.type == "tool_use"]
            records = [session.tools.call(b.name, b.input, b.id) for b in calls]  # one at a time, in order
            results = [
                {"type": "tool_result", "tool_use_id": b.id, "content": r.result, "is_error": r.is_error}
                for b, r in zip(calls, records, strict=True)
            ]
            messages.append({"role": "user", "content": results})
            if stop := session.tool_stop():
                return Finished.stopped(stop)
        return session.conclude(None)

    def _openai_loop(self, task: str, session: RunSession) -> Finished:
        model = session.model
        client = session.openai_client(is_async=False)
        tools = [
            {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
            for t in session.tools.tools
        ]
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": session.system_prompt},
            {"role": "user", "content": task},
        ]
        for _ in _steps(session):
            if stop := session.budget_stop():
                return Finished.stopped(stop)
            reply = client.chat.completions.create(
                model=model.name, messages=messages, tools=tools, timeout=session.remaining_s()
            )
            message = reply.choices[0].message
            messages.append(message.model_dump(include={"role", "content", "tool_calls"}, exclude_none=True))
            if not message.tool_calls:
                return session.conclude(message.content)
            for call in message.tool_calls:
                record = session.tools.call(call.function.name, call.function.arguments, call.id)
                # Chat Completions has no is_error field: the observation text says it.
                messages.append({"role": "tool", "tool_call_id": call.id, "content": record.result})
            if stop := session.tool_stop():
                return Finished.stopped(stop)
        return session.conclude(None)

    def bare_loop(self) -> BareRun:
        return bare_run


def _steps(session: RunSession) -> Iterable[int]:
    # cap:begin
    return range(session.cap) if session.cap is not None else itertools.count()
    # cap:end


def bare_run(
    task: str, tools: Sequence[BareTool], urls: dict[str, str], model: str, max_steps: int, *, system_prompt: str
) -> int:
    """The Messages loop above with none of looplab's boundaries: plain client, plain tool functions."""
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


ADAPTER = HandRolled()
