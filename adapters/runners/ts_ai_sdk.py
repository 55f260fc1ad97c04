"""`ts_ai_sdk`: the AI SDK's `generateText({ tools, stopWhen: stepCountIs(N) })` in a Node process.

The seed's AI SDK tab, run by `node` (`adapters/runners/ts/ai_sdk.mjs`) with `@ai-sdk/openai` for chat and
responses, `@ai-sdk/anthropic` for messages and `@ai-sdk/google` for Gemini's API, the run's tools over MCP and
the model behind looplab's recording proxy (the contract: `adapters/runners/_child.py`). A step is one model call, so
`stepCountIs(N)` is N model calls; at the cap `generateText` returns silently with an empty text.
The newest `ai` major renames the condition `isStepCount`; the program uses whichever the installed
release exports and names it in its outcome (`stop_condition`). `ai` 7 and `@ai-sdk/*` 4 need Node.js 22: the pins
stay on `ai` 6, and the `ai7` npm line tests 7 on Node 22 (7.0.173 with `@ai-sdk/*` 4 passed its conformance tests
and cases with the same program).

Replies come whole (`generateText`), or streamed with `--stream on`: the same options to `streamText`, consumed to
its end, whose text, finish reason and steps are `generateText`'s. `streamText` hands an error (the proxy's refusal)
to `onError` and ends its stream where `generateText` throws it; the program throws the first one, so a run ends the
same either way. `@ai-sdk/openai` asks a streamed Chat Completions reply for its usage (`include_usage`) itself.

A case's delegate is a subagent as a tool, as the AI SDK writes one: a `tool` whose `execute` runs a nested
`generateText` with the same model, settings and `stopWhen`, the run's tools, the delegate's instructions as `system`
and the question as `prompt`, returning its text. Its steps are its own: the parent's `stopWhen` sees the whole
nested run as one tool call of one step, and at its own cap the child returns an empty text, which the parent gets as
the tool's result. A child's error (the proxy's refusal) is the parent's tool-error result; the proxy refuses the
parent's next request in turn.
"""

from __future__ import annotations

from looplab.adapters.contract.errors import LooplabError
from looplab.adapters.contract.limits import Limits
from looplab.adapters.contract.model import Api
from looplab.adapters.contract.result import NativeCap
from looplab.adapters.contract.runner import KnobDefault
from looplab.adapters.runners._node import NodeRunner

__all__ = ["RUNNER"]


class TsAiSdk(NodeRunner):
    """`generateText` in a Node process, `stopWhen` set from `max_steps`."""

    name = "ts_ai_sdk"
    summary = "the AI SDK's generateText (stopWhen: stepCountIs), in node"
    npm_packages = {"ai": "6.0.0", "@ai-sdk/openai": "3.0.73", "@ai-sdk/anthropic": "3.0.0", "@ai-sdk/google": "3.0.0"}
    npm_lines = {
        "ai6": (20, {"ai": "6", "@ai-sdk/openai": "3", "@ai-sdk/anthropic": "3", "@ai-sdk/google": "3"}),
        "ai7": (22, {"ai": "7", "@ai-sdk/openai": "4", "@ai-sdk/anthropic": "4", "@ai-sdk/google": "4"}),
    }
    listed = 130
    distribution = "ai"
    program = "ai_sdk.mjs"
    apis: tuple[Api, ...] = ("chat", "responses", "messages", "gemini")
    knobs = ("stopWhen: stepCountIs",)
    streams = (False, True)
    delegation = "subagent as a tool: its execute runs a nested generateText, whose steps the parent's stopWhen ignores"

    def native_cap(self, limits: Limits) -> NativeCap:
        """`stopWhen: stepCountIs(N)`: N steps, each one model call (the program builds it from LOOPLAB_CAP)."""
        return NativeCap(knob=self.knobs[0], value=limits.max_steps)

    def knob_defaults(self) -> dict[str, KnobDefault]:
        """`generateText`'s default `stopWhen`, read from its parameter list by `describe.mjs`."""
        read = self.defaults()["defaults"]["stop_when"]
        if read["value"] is None:
            raise LooplabError("generateText's default stopWhen was not found in the installed 'ai'")
        return {self.knobs[0]: KnobDefault(value=read["value"], source=read["source"])}


RUNNER = TsAiSdk()
