"""The Anthropic SDK's beta tool runner: `client.beta.messages.tool_runner(max_iterations=N)`.

The SDK runs the loop: it sends a request, runs the reply's tool calls one
after another, and sends the results back, until a reply asks for no tools or
`max_iterations` replies have been received. At that cap it stops silently and
its last message still has `stop_reason == "tool_use"`; `session.conclude`
turns that into `max_steps`. Messages API only (Anthropic models). Replies come whole,
or streamed with `--stream on` (`tool_runner(stream=True)`, which yields each reply's message stream).
A case's delegate is a tool whose function runs a second tool runner, nested (`_anthropic_tool_runner`).
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Sequence
from typing import Any

import anthropic
from anthropic.lib.tools import BetaFunctionTool

from looplab.adapters.boundary.plain import plain_http_client
from looplab.adapters.contract.agents import Delegate
from looplab.adapters.contract.bare import BareRun, BareTool
from looplab.adapters.contract.limits import Limits
from looplab.adapters.contract.model import MESSAGES_MAX_TOKENS
from looplab.adapters.contract.result import Finished, NativeCap
from looplab.adapters.contract.runner import KnobDefault, signature_default
from looplab.adapters.runners._anthropic_tool_runner import (
    CallIds,
    delegating_tool,
    guarded_tool,
    replies,
    whole_history,
)
from looplab.adapters.session import Runner, RunSession

__all__ = ["RUNNER"]


class AnthropicToolRunner(Runner):
    """`client.beta.messages.tool_runner(...)` with the Guard's tools as `BetaFunctionTool`s."""

    name = "anthropic_tool_runner"
    summary = "the Anthropic SDK's beta tool runner (max_iterations)"
    requires = ("anthropic",)
    listed = 10
    extra = "anthropic"
    distribution = "anthropic"
    apis = ("messages",)
    streams = (False, True)
    knobs = ("client.beta.messages.tool_runner(max_iterations=)",)
    delegation = "a BetaFunctionTool running a nested tool_runner: its own max_iterations; the parent's counts its own"

    def native_cap(self, limits: Limits) -> NativeCap:
        """`max_iterations` counts the replies the runner asks for, i.e. model calls."""
        return NativeCap(knob=self.knobs[0], value=limits.max_steps)

    def knob_defaults(self) -> dict[str, KnobDefault]:
        """The signature's default for `max_iterations` (the SDK's `omit` sentinel means no limit)."""
        runner = anthropic.resources.beta.messages.Messages.tool_runner
        return {self.knobs[0]: signature_default(runner, "max_iterations")}

    def loop(self, task: str, session: RunSession) -> Finished:
        """Run the SDK's tool runner to its end and conclude from its last message."""
        self.api_for(session.model)
        # The SDK makes OpenTelemetry spans by default; this run records at its own boundaries instead.
        client: anthropic.Anthropic = session.anthropic_client(is_async=False).with_options(open_telemetry=False)

        def run(system: str, prompt: str, delegate: Delegate | None, max_iterations: int | None) -> Any:
            """One tool runner to its end, capped at `max_iterations` (None: the SDK's default), offered `delegate`
            as a tool whose function runs this again, nested, with the delegates' cap (`session.child_cap`) and the
            delegate's own delegate (a nested tree); its last message."""
            # cap:begin
            cap = {} if max_iterations is None else {"max_iterations": max_iterations}
            # cap:end
            call_ids: CallIds = defaultdict(deque)
            tools = [guarded_tool(t, session, call_ids) for t in session.tools.tools]
            if delegate is not None:  # the child gets the run's tools and its own delegate, never itself
                tools.append(delegating_tool(delegate, run, session.child_cap))
            runner = client.beta.messages.tool_runner(
                model=session.model.name,
                max_tokens=MESSAGES_MAX_TOKENS,
                system=system,
                messages=[{"role": "user", "content": prompt}],
                tools=tools,
                timeout=session.remaining_s(),
                stream=session.model.stream,
                **cap,
                **whole_history(client),
            )
            message = None
            for message in replies(runner, session.model.stream):
                for block in message.content:
                    if block.type == "tool_use":
                        call_ids[block.name].append(block.id)
            return message

        message = run(session.system_prompt, task, session.delegate, session.cap)
        if message is None or message.stop_reason == "tool_use":
            # At `max_iterations` the runner returns its last reply, which still asked for tools.
            return session.conclude(None)
        return session.conclude("".join(b.text for b in message.content if b.type == "text"))

    def bare_loop(self) -> BareRun:
        return bare_run


def bare_run(
    task: str, tools: Sequence[BareTool], urls: dict[str, str], model: str, max_steps: int, *, system_prompt: str
) -> int:
    """The same tool runner with none of looplab's boundaries: plain client, plain tool functions."""
    url = urls["anthropic"]
    http = plain_http_client(anthropic, url)
    with anthropic.Anthropic(api_key="not-needed", base_url=url, http_client=http).with_options(
        open_telemetry=False
    ) as client:
        runner = client.beta.messages.tool_runner(
            model=model,
            max_tokens=MESSAGES_MAX_TOKENS,
            system=system_prompt,
            messages=[{"role": "user", "content": task}],
            tools=[
                BetaFunctionTool(t.fn, name=t.name, description=t.description, input_schema=t.parameters) for t in tools
            ],
            max_iterations=max_steps,
            **whole_history(client),
        )
        return sum(1 for _ in runner)  # one reply per model request


RUNNER = AnthropicToolRunner()
