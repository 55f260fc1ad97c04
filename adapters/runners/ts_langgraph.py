"""`ts_langgraph`: a LangGraph.js `StateGraph` with a step counter in its state, in a Node process.

The graph looplab's Python `langgraph` runner builds (a model node, the prebuilt `ToolNode`, a step counter the
edge after the model reads), written with `@langchain/langgraph` and run by `node`
(`adapters/runners/ts/langgraph.mjs`) with the run's tools over MCP and the model behind looplab's recording proxy
(the contract: `adapters/runners/_child.py`): `@langchain/openai`'s `ChatOpenAI` for chat and responses
(`useResponsesApi`), `@langchain/anthropic`'s `ChatAnthropic` for messages, `@langchain/google-genai`'s
`ChatGoogleGenerativeAI` (on `@google/generative-ai`, its `baseUrl` the proxy) for Gemini's API.

Measured with `@langchain/langgraph` 1.7.3 against the scripted model: `max_steps=N` is the counter at N model
calls, after which the graph ends silently on a reply that still asks for tools; `recursionLimit` (default read
from the installed package by `describe.mjs`: a node of a graph invoked with no config sees it) counts super-steps,
one for the model node and one for the tools node per call, and stays as a backstop of `2 * N + 10`. Set on its
own, the graph throws `GraphRecursionError` past it, with no history on the error (looplab's trace has it).

On Gemini's API LangChain's own caller retries (`@google/generative-ai` retries nothing); it gives up at once on a
429 without a Retry-After, which the program has it retry like a 5xx, as the provider SDKs do on the other APIs.
`@langchain/openai` 1.5.9 and newer need Node.js 22: the pins stay on 1.5.8, and the `node22` npm line tests the
newest (1.6.0 passed the conformance tests and cases on Node 22).

A case's delegate is a subagent as a tool, as the Python `langgraph` runner builds it: a `DynamicStructuredTool` whose
body invokes a second graph built the same way (the same model, counter and config, the run's tools, the delegate's
instructions as its system prompt) with the question as its user message, returning its final message's text. Its
`invoke` is a Pregel loop of its own: its counter and `recursionLimit` count its calls alone, the parent's none of
them. What it throws (its `GraphRecursionError`, the proxy's refusal) is the parent's tool error (`ToolNode`'s
`handleToolErrors`); the proxy refuses the parent's next request in turn.

Replies come whole (`graph.invoke`), or streamed with `--stream on`: `graph.stream` in LangGraph's `messages` mode
(beside `values`, whose last chunk is the final state), whose callback handler has each chat model's `invoke` stream
its reply and join the chunks; the delegate's graph runs the same way. `streamUsage: true` (each class's default)
keeps the usage in the stream (Chat Completions: `stream_options.include_usage`). Not the chat model's own
`streaming: true`: `ChatOpenAI` on Chat Completions then also estimates each streamed reply's tokens with a tiktoken
encoding it fetches from tiktoken.pages.dev (`@langchain/core` `utils/tiktoken.js`), which stalls a run offline.
A streamed tool call whose arguments are not a JSON object becomes an invalid tool call (`@langchain/core`
`messages/utils.js` `collapseToolCallChunks`), which ends the graph; whole, `ChatAnthropic` passes such arguments to
`ToolNode`, which answers with an error (measured on messages with the sloppy persona).
"""

from __future__ import annotations

from looplab.adapters.contract.limits import Limits
from looplab.adapters.contract.model import Api
from looplab.adapters.contract.result import NativeCap
from looplab.adapters.contract.runner import KnobDefault
from looplab.adapters.runners._node import NodeRunner

__all__ = ["RUNNER"]

#: The knobs, as the program reads LOOPLAB_CAP_KNOB: the state's counter (`max_steps` maps here) and the graph's limit.
COUNTER = "state step counter"
RECURSION = "recursionLimit"


def recursion_backstop(model_calls: int) -> int:
    """The `recursionLimit` the program sets beside the counter (`recursionBackstop` in langgraph.mjs)."""
    return 2 * model_calls + 10


class TsLangGraph(NodeRunner):
    """A two-node ReAct `StateGraph` in a Node process, the cap a counter in its state."""

    name = "ts_langgraph"
    summary = "a LangGraph.js StateGraph: model node, ToolNode, step counter, in node"
    npm_packages = {
        "@langchain/langgraph": "1.7.3",
        "@langchain/core": "1.4.0",
        "@langchain/openai": "1.5.8",
        "@langchain/anthropic": "1.5.11",
        "@langchain/google-genai": "2.3.2",
    }
    #: `@langchain/openai` 1.5.9 and newer need Node.js 22.
    npm_lines = {
        "node20": (
            20,
            {
                "@langchain/langgraph": "1",
                "@langchain/core": "1",
                "@langchain/openai": "1.5.8",
                "@langchain/anthropic": "1",
                "@langchain/google-genai": "2",
            },
        ),
        "node22": (
            22,
            {
                "@langchain/langgraph": "1",
                "@langchain/core": "1",
                "@langchain/openai": "1",
                "@langchain/anthropic": "1",
                "@langchain/google-genai": "2",
            },
        ),
    }
    listed = 150
    distribution = "@langchain/langgraph"
    program = "langgraph.mjs"
    apis: tuple[Api, ...] = ("chat", "responses", "messages", "gemini")
    knobs = (COUNTER, RECURSION)
    streams = (False, True)
    delegation = "subagents as tools: a tool invoking a second StateGraph (its own invoke, uncounted by the parent)"

    def native_cap(self, limits: Limits) -> NativeCap:
        """The state's step counter stops at `max_steps` model calls, `recursionLimit` a backstop behind it."""
        return NativeCap(
            knob=f"{COUNTER} (recursionLimit={recursion_backstop(limits.max_steps)} backstop)", value=limits.max_steps
        )

    def knob_defaults(self) -> dict[str, KnobDefault]:
        """No counter unless one is built; the `recursionLimit` a graph invoked without one runs under."""
        read = self.defaults()["defaults"]["recursion_limit"]
        return {
            COUNTER: KnobDefault(value=None, source="a field of this graph's state: no default"),
            RECURSION: KnobDefault(value=read["value"], source=read["source"]),
        }


RUNNER = TsLangGraph()
