"""`ts_openai_agents`: the OpenAI Agents SDK for TypeScript, `run(agent, task, { maxTurns })`, in a Node process.

An `Agent` with the run's tools over MCP, run by `node` (`adapters/runners/ts/openai_agents.mjs`) with the model
behind looplab's recording proxy (the contract: `adapters/runners/_child.py`): `OpenAIResponsesModel` (the SDK's
default API) or `OpenAIChatCompletionsModel` on an `openai` client pointed at the proxy.

Measured with `@openai/agents` 0.14.3 against the scripted model: a turn is one model call (plus the tools it asked
for), so `maxTurns: N` makes N model calls; when the Nth still asks for tools the SDK throws `MaxTurnsExceededError`
before an (N+1)th call, and that error carries the run's state (`error.state`, whose `history` is the partial
conversation). `errorHandlers: { maxTurns }` (the second knob) returns a final output instead of throwing. The
default, `DEFAULT_MAX_TURNS` (10), is read from the installed `@openai/agents-core` by `describe.mjs`.

The program imports the two packages `@openai/agents` re-exports (`@openai/agents-core`, `@openai/agents-openai`)
rather than the umbrella, which also loads the realtime package: module loading counts against the run's clock.
Releases from 0.15 on need `openai` 7, which needs Node.js 22: the pins stay on the newest that runs on Node 20, and
the `openai7` npm line tests the newer ones on Node 22 (0.20.0 with `openai` 7.59.0 passed its conformance tests and
cases unchanged).

A case's delegate is the SDK's agent as a tool (`agent.asTool`): an `Agent` with the same model and the run's tools,
run by a nested `Runner.run` (a `RunState` of its own) up to `maxTurns` of its own; the parent's `maxTurns` does not
count its turns. A child's error (its `MaxTurnsExceededError`, the proxy's refusal) is the tool's failure text to the
parent's model (`tool()`'s default `errorFunction`); the proxy refuses the parent's next request in turn.

Replies come whole, or streamed with `--stream on`: `run(agent, task, { stream: true })`, its events read to the end
and `completed` awaited (a `MaxTurnsExceededError` is thrown from the stream, its state on it, as whole); the
delegate's nested run streams through `asTool`'s `onStream`. On chat the SDK asks a stream for its usage
(`include_usage`) itself.
"""

from __future__ import annotations

from looplab.adapters.contract.errors import LooplabError
from looplab.adapters.contract.limits import Limits
from looplab.adapters.contract.model import Api
from looplab.adapters.contract.result import Finished, NativeCap
from looplab.adapters.contract.runner import KnobDefault
from looplab.adapters.runners._node import NodeRunner
from looplab.adapters.session import RunSession

__all__ = ["RUNNER"]

#: The knob `max_steps` maps to (the program compares LOOPLAB_CAP_KNOB with the same text).
MAX_TURNS = "run(agent, task, { maxTurns })"


class TsOpenAIAgents(NodeRunner):
    """`Agent` + `run` in a Node process, `maxTurns` set from `max_steps`."""

    name = "ts_openai_agents"
    summary = "the OpenAI Agents SDK for TypeScript, Agent + run (maxTurns), in node"
    npm_packages = {
        "@openai/agents": "0.14.3",
        "@openai/agents-core": "0.14.3",
        "@openai/agents-openai": "0.14.3",
        "openai": "6.49.0",
    }
    #: 0.15 and newer need `openai` 7, which needs Node.js 22.
    npm_lines = {
        "openai6": (
            20,
            {"@openai/agents": "0.14", "@openai/agents-core": "0.14", "@openai/agents-openai": "0.14", "openai": "6"},
        ),
        "openai7": (
            22,
            {"@openai/agents": "0", "@openai/agents-core": "0", "@openai/agents-openai": "0", "openai": "7"},
        ),
    }
    listed = 140
    distribution = "@openai/agents"
    program = "openai_agents.mjs"
    apis: tuple[Api, ...] = ("responses", "chat")
    knobs = (MAX_TURNS, "run(agent, task, { maxTurns, errorHandlers: { maxTurns } })")
    streams = (False, True)
    delegation = "agents as tools (agent.asTool): a nested Runner.run, its turns not counted by the parent's maxTurns"
    ending_tool = "new Agent({ toolUseBehavior: { stopAtToolNames: [...] } })"

    def native_cap(self, limits: Limits) -> NativeCap:
        """`maxTurns: N`: N turns, each one model call; turn N+1 throws `MaxTurnsExceededError` before calling."""
        return NativeCap(knob=self.knobs[0], value=limits.max_steps)

    def knob_defaults(self) -> dict[str, KnobDefault]:
        """`DEFAULT_MAX_TURNS`, which `run` uses when no `maxTurns` is given, read by `describe.mjs`."""
        read = self.defaults()["defaults"]["max_turns"]
        if read["value"] is None:
            raise LooplabError("DEFAULT_MAX_TURNS was not found in the installed '@openai/agents-core'")
        return dict.fromkeys(self.knobs, KnobDefault(value=read["value"], source=read["source"]))

    def loop(self, task: str, session: RunSession) -> Finished:
        """The child's run; a `MaxTurnsExceededError` it threw is recorded as carrying the history, as it does."""
        finished = super().loop(task, session)
        end = session.native_end
        if end is not None and end.kind == "raised" and (end.exception or "").endswith(".MaxTurnsExceededError"):
            end.history = "MaxTurnsExceededError.state"
        return finished


RUNNER = TsOpenAIAgents()
