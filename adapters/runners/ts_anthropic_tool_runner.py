"""`ts_anthropic_tool_runner`: the Anthropic TypeScript SDK's `client.beta.messages.toolRunner({ max_iterations })`.

The seed's TypeScript tab, run by `node` (`adapters/runners/ts/anthropic_tool_runner.mjs`) with the run's
tools over MCP and the model behind looplab's recording proxy (the contract: `adapters/runners/_child.py`).
`max_iterations` counts requests, i.e. model calls; at the cap the runner stops silently with a last
reply that still asked for tools, which the boundaries record as `max_steps`. Messages API only.

A case's delegate is a runnable tool (`betaTool`) whose `run` runs a nested `toolRunner` with the same client, model,
tools and `max_iterations`, the delegate's instructions as `system` and the question as its user message, returning
the text of its last reply. Its requests are its own: the parent's `max_iterations` counts the whole nested run as
none of its own, and at its own cap the child returns the text of a reply that still asked for tools (often empty).
Anything the nested runner throws (the proxy's refusal) is the parent's `tool_result` with `is_error: true`.

Replies come whole, or streamed with `--stream on`: the runner's own `stream: true` (it yields a `BetaMessageStream`
a request, and `await runner` reads each to its final message), for the delegate's nested runner too. The tools still
run once a reply is whole (`runToolsEagerly`, which would start them mid-stream, stays off).
"""

from __future__ import annotations

from looplab.adapters.contract.limits import Limits
from looplab.adapters.contract.model import Api
from looplab.adapters.contract.result import NativeCap
from looplab.adapters.contract.runner import KnobDefault
from looplab.adapters.runners._node import NodeRunner

__all__ = ["RUNNER"]


class TsAnthropicToolRunner(NodeRunner):
    """`toolRunner` in a Node process, `max_iterations` set from `max_steps`."""

    name = "ts_anthropic_tool_runner"
    summary = "the Anthropic TypeScript SDK's toolRunner (max_iterations), in node"
    npm_packages = {"@anthropic-ai/sdk": "1.0.0"}
    npm_lines = {"sdk1": (20, {"@anthropic-ai/sdk": "1"})}
    listed = 120
    distribution = "@anthropic-ai/sdk"
    program = "anthropic_tool_runner.mjs"
    apis: tuple[Api, ...] = ("messages",)
    knobs = ("max_iterations",)
    streams = (False, True)
    delegation = "a tool whose run runs a nested toolRunner, its requests not counted by the parent's max_iterations"

    def native_cap(self, limits: Limits) -> NativeCap:
        """`max_iterations=N`: N requests, i.e. N model calls (the program passes LOOPLAB_CAP on as it)."""
        return NativeCap(knob=self.knobs[0], value=limits.max_steps)

    def knob_defaults(self) -> dict[str, KnobDefault]:
        """`max_iterations` as a runner built without one holds it, read by `describe.mjs` (unset: no cap)."""
        read = self.defaults()["defaults"]["max_iterations"]
        return {self.knobs[0]: KnobDefault(value=read["value"], source=read["source"])}


RUNNER = TsAnthropicToolRunner()
