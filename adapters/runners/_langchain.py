"""LangChain glue shared by the `langchain` and `langgraph` runners: the chat model and the tools.

The chat model speaks Chat Completions, Responses, Anthropic Messages or Gemini's
generateContent through the SDK clients the session builds (so every request
passes the recorder and its gate); the tools hand every call, raw, to the Guard.
Their bare loops get the same pieces without looplab: `plain_chat_model`, `plain_tools`. A case's delegate
reaches the parent as `delegating_tool`, LangChain's "subagents as tools".

Gemini's API is `langchain-google-genai`'s `ChatGoogleGenerativeAI` (measured on 4.4.3), imported only when a run
asks for it. It always builds its own google-genai `Client` in its validator, so the session's recorded one replaces
it after construction. Both runners call the model synchronously (`generate_content`, or `generate_content_stream`
streamed), so the sync client is the one built: an async call (`ainvoke`) would use google-genai's own unrecorded
HTTP client, and neither runner makes one.

Replies come whole, or streamed with `--stream on`: the chat model's own `streaming=True`, with which its `invoke`
streams the request and puts the chunks together into the same `AIMessage`, in the parent's graph and the delegate's
alike (`chat_model`); `ChatOpenAI` also gets `stream_usage=True`, the usage chunk it asks a non-OpenAI server for only
when told.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from langchain_anthropic import ChatAnthropic
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool, ToolException, tool
from langchain_openai import ChatOpenAI
from langsmith import tracing_context

from looplab.adapters.boundary.plain import plain_http_client
from looplab.adapters.contract.agents import Delegate
from looplab.adapters.contract.bare import BareTool
from looplab.adapters.contract.limits import StopReason
from looplab.adapters.contract.model import MESSAGES_MAX_TOKENS, Api
from looplab.adapters.contract.result import Finished, NativeEnd
from looplab.adapters.contract.tools import ToolBoundary
from looplab.adapters.runners._gemini import gemini_class
from looplab.adapters.session import Runner, RunSession
from looplab.shared_tools.records import shorten

#: The most of a kept call's arguments, and of the framework's reason, a run's record quotes.
QUOTED_CHARS = 300


def chat_model(runner: Runner, session: RunSession) -> BaseChatModel:
    """`runner`'s LangChain chat model for the session's model and wire API, sending every request through the
    session's recorded SDK clients."""
    api: Api = runner.api_for(session.model)
    name = session.model.name
    # Given only when streaming: a whole run's chat model is built as it always was.
    streamed: dict[str, Any] = {"streaming": True} if session.model.stream else {}
    if api == "gemini":
        return _gemini_chat_model(runner, session, streamed)
    if api == "messages":
        model = ChatAnthropic(
            model=name,
            api_key=session.model.key(),
            base_url=session.model.base_url,
            max_tokens=MESSAGES_MAX_TOKENS,
            **streamed,  # its stream_usage is on by default: Messages streams carry usage anyway
        )
        # ChatAnthropic has no field for a prebuilt client: it makes its SDK clients lazily, in the cached
        # properties `_client`/`_async_client`. Filling that cache first hands it the recorded clients.
        model.__dict__["_client"] = session.anthropic_client(is_async=False)
        model.__dict__["_async_client"] = session.anthropic_client(is_async=True)
        return model
    sync, aio = session.openai_client(is_async=False), session.openai_client(is_async=True)
    return ChatOpenAI(
        model=name,
        root_client=sync,
        client=sync.chat.completions,
        root_async_client=aio,
        async_client=aio.chat.completions,
        use_responses_api=api == "responses",
        # On by default only for OpenAI's own endpoint (an OpenAI-compatible server may refuse `stream_options`).
        **({**streamed, "stream_usage": True} if streamed else {}),
    )


def _gemini_chat_model(runner: Runner, session: RunSession, streamed: dict[str, Any]) -> BaseChatModel:
    """`ChatGoogleGenerativeAI` on the session's recorded google-genai client (a missing package: `MissingExtra`)."""
    chat_google = gemini_class(runner.name, runner.extra, "langchain_google_genai", "ChatGoogleGenerativeAI")
    model = chat_google(
        model=session.model.name,
        api_key=session.model.key(),
        base_url=session.model.base_url,
        # Its own client is replaced below: never let its validator set one up for Vertex AI (project, credentials).
        vertexai=False,
        # Sent with every request as its retry policy, over the client's (the default, 6, would override the run's);
        # google-genai counts attempts, so retries=0 is one attempt.
        max_retries=session.model.retries + 1,
        **streamed,
    )
    # The validator has already built a google-genai Client of its own (nothing is sent on construction);
    # the field is plain, so the recorded client takes its place.
    model.client = session.gemini_client(is_async=False)
    return model


class GuardTool(BaseTool):
    """One Guard tool as a LangChain tool: the model sees its own schema, the Guard runs every call."""

    guard: Any
    #: Turns the ToolException raised for a failed call into a ToolMessage with status="error".
    handle_tool_error: bool = True

    def _to_args_and_kwargs(self, tool_input: Any, tool_call_id: str | None) -> tuple[tuple, dict[str, Any]]:
        # Skip LangChain's input parsing: the raw arguments go to the Guard, which validates them,
        # together with the call id the trace pairs results by.
        return (), {"args": tool_input, "call_id": tool_call_id}

    def _run(self, args: Any, call_id: str | None) -> str:
        record = self.guard.call(self.name, args, call_id)
        if record.is_error:
            raise ToolException(record.result)
        return record.result


def guard_tools(guard: ToolBoundary, ending: str | None = None) -> list[BaseTool]:
    """The Guard's tools (`session.tools`) as LangChain tools with their own name, description and JSON schema;
    the one named `ending` (if any) `return_direct`: its result ends the agent's run as its final message."""
    return [
        GuardTool(name=t.name, description=t.description, args_schema=t.parameters, guard=guard, return_direct=ends)
        for t in guard.tools
        for ends in [t.name == ending]
    ]


def delegating_tool(delegate: Delegate, child: Runnable, config: RunnableConfig, **start: Any) -> BaseTool:
    """`delegate` as a tool of its parent, in LangChain's "subagents as tools" idiom: one string argument,
    `question`; the body runs the `child` graph in an `invoke` of its own, with the question as its one user
    message (`start`: the child's other starting fields), and returns the text of its final message.

    A separate `invoke` is a separate Pregel loop with a step count of its own (`config`'s `recursion_limit`), and
    the child's state (a step counter, a middleware's call count) starts afresh: no native cap of the parent counts
    the child's calls. The session's boundary counts them all. A `StopRun` from that boundary inside the child is a
    BaseException: it passes every `except Exception` on the way out (ToolNode's among them) to `Runner.run`.
    """

    def ask(question: str) -> str:
        state = child.invoke({**start, "messages": [HumanMessage(question)]}, config)
        return state["messages"][-1].text

    return tool(delegate.name, description=delegate.description)(ask)


def plain_chat_model(urls: dict[str, str], model: str) -> BaseChatModel:
    """Chat Completions (both runners' first API) on a plain SDK client: `chat_model` without the recorder."""
    import openai

    url = urls["openai"]
    return ChatOpenAI(model=model, api_key="not-needed", base_url=url, http_client=plain_http_client(openai, url))


def plain_tools(tools: Sequence[BareTool]) -> list[BaseTool]:
    """Plain tool functions as LangChain tools, with the same names, descriptions and JSON schemas."""
    return [
        StructuredTool.from_function(t.fn, name=t.name, description=t.description, args_schema=t.parameters)
        for t in tools
    ]


@contextmanager
def no_tracing() -> Iterator[None]:
    """LangSmith tracing off for the block, whatever the environment says: nothing may try the network."""
    with tracing_context(enabled=False):
        yield


def conclude(session: RunSession, last: BaseMessage, answer: str | None) -> Finished:
    """`session.conclude(answer)`, naming the tool calls that ended the run when LangChain could not parse them.

    A reply's tool call whose arguments are not JSON is not among the `AIMessage`'s `tool_calls`: LangChain keeps
    it in `invalid_tool_calls`, with the parse error. A reply with only such calls has no tool call to run, so both
    runners' graphs end there (create_agent's edge after the model and LangGraph's `route` read `tool_calls` only),
    without an answer and without the Guard seeing the call. The record then names each kept call, its arguments
    as the model sent them, and the framework's reason.
    """
    kept = last.invalid_tool_calls if isinstance(last, AIMessage) and not last.tool_calls else []
    if not kept:
        return session.conclude(answer)
    calls = "; ".join(
        f"{call.get('name')}({shorten(str(call.get('args') or ''), QUOTED_CHARS)}): "
        + shorten(" ".join(str(call.get("error") or "no reason given").split()), QUOTED_CHARS)
        for call in kept
    )
    what = "tool call" if len(kept) == 1 else f"{len(kept)} tool calls"
    why = f"the framework could not parse the model's {what} and ended the run (AIMessage.invalid_tool_calls): {calls}"
    session.native_end = NativeEnd(kind="returned", message=why, text=answer)
    finished = session.conclude(answer)
    # A stop the boundaries asked for, or the cap, still wins; an error is this one.
    return Finished(StopReason.ERROR, detail=why) if finished.reason is StopReason.ERROR else finished
