"""`responses_loop`: a tool-calling loop on the OpenAI Responses API, as a package other than looplab ships one.

The runner is declared on its class (looplab reads the literal attributes without importing this module), named
in the `looplab.runners` entry-point group in pyproject.toml, and checked by looplab's conformance plugin
(tests/). Its model calls go through the run's recorded client (`session.openai_client`), its tool calls
through `session.tools`, so looplab counts, gates and stops it as it does its own runners.
"""

from __future__ import annotations

from typing import Any

from looplab.adapters.contract.limits import Limits
from looplab.adapters.contract.result import Finished, NativeCap
from looplab.adapters.contract.runner import KnobDefault
from looplab.adapters.session import Runner, RunSession


class ResponsesLoop(Runner):
    name = "responses_loop"
    summary = "an example runner from another package: a loop on the OpenAI Responses API"
    extra = "openai"
    distribution = "looplab-responses-loop"
    requires = ("openai",)
    apis = ("responses",)
    knobs = ("turns",)

    def native_cap(self, limits: Limits) -> NativeCap:
        return NativeCap(knob=self.knobs[0], value=limits.max_steps)

    def knob_defaults(self) -> dict[str, KnobDefault]:
        return {self.knobs[0]: KnobDefault(value=None, source="looplab_responses_loop: the caller's max_steps")}

    def loop(self, task: str, session: RunSession) -> Finished:
        client = session.openai_client(is_async=False)
        tools = [
            {"type": "function", "name": t.name, "description": t.description, "parameters": t.parameters}
            for t in session.tools.tools
        ]
        items: list[Any] = [{"role": "user", "content": task}]
        # cap:begin
        for _turn in range(session.cap or session.limits.max_steps):
            # cap:end
            if stop := session.budget_stop():
                return Finished.stopped(stop)
            reply = client.responses.create(
                model=session.model.name,
                instructions=session.system_prompt,
                input=items,
                tools=tools,
                timeout=session.remaining_s(),
            )
            calls = [item for item in reply.output if item.type == "function_call"]
            if not calls:
                return session.conclude(reply.output_text)
            for call in calls:
                items.append(call.model_dump(include={"type", "call_id", "name", "arguments"}))
                record = session.tools.call(call.name, call.arguments, call.call_id)
                items.append({"type": "function_call_output", "call_id": call.call_id, "output": record.result})
            if stop := session.tool_stop():
                return Finished.stopped(stop)
        return session.conclude(None)


RUNNER = ResponsesLoop()
