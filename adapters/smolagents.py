"""smolagents: a `ToolCallingAgent` (native tool calls; `CodeAgent` is out of scope) and `agent.run(task)`.

OpenAI Chat Completions goes through `OpenAIModel(client=...)` on the session's recorded client;
Anthropic Messages through `LiteLLMModel`, which builds its own HTTP client, pointed at the run's
recording proxy. smolagents sends its history as text, not as tool messages: each step is an
assistant message "Calling tools: [...]" and a user message "Observation: ..." (one for all the
step's calls). `max_steps` counts action steps, one model call each (measured). When the steps run
out, smolagents makes one more call, with no tools offered, asking for an answer from memory, and
returns that call's text with `state="max_steps_error"` rather than raising; the partial history
is `agent.memory.steps`. looplab sets `max_steps=N`, so that wrap-up call would be call N+1: the
model boundary refuses it and the run ends `max_steps`.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from typing import Any

from smolagents import LiteLLMModel, LogLevel, OpenAIModel, Tool, ToolCallingAgent
from smolagents.agents import MultiStepAgent
from smolagents.memory import ActionStep
from smolagents.models import ChatMessage, ChatMessageToolCall, ChatMessageToolCallFunction

from adapters.bare import BareTool, plain_http_client
from adapters.base import (
    SYSTEM_PROMPT,
    Adapter,
    Finished,
    KnobDefault,
    Limits,
    MissingExtra,
    ModelSpec,
    NativeCap,
    RunSession,
    ToolBoundary,
    installed_version,
)
from adapters.proxy import ModelProxy

KNOB = "ToolCallingAgent(max_steps=)"


class TextAnswers:
    """Mixed into a smolagents model: a reply without tool calls is the answer, as every other runner takes it.

    smolagents wants a `final_answer` tool call (and asks for one with `tool_choice="required"`); it would
    read a plain reply as a JSON action and, failing that, make it an error step that costs another call.
    `parse_tool_calls` is what it calls on a reply without tool calls: here it becomes `final_answer(text)`.
    """

    def parse_tool_calls(self, message: ChatMessage) -> ChatMessage:
        call = ChatMessageToolCallFunction(name="final_answer", arguments={"answer": message.content or ""})
        message.tool_calls = [ChatMessageToolCall(function=call, id="text-reply", type="function")]
        return message


class ChatModel(TextAnswers, OpenAIModel):
    """Chat Completions on a given `openai.OpenAI` client."""


class MessagesModel(TextAnswers, LiteLLMModel):
    """Anthropic Messages through LiteLLM."""


class SchemaTool(Tool):
    """A tool as smolagents declares it: the Guard's name and description, `inputs` from its JSON schema.

    smolagents rebuilds the schema it sends from `inputs` (each property as given, `required` from
    which are not `nullable`); the schema's `additionalProperties` does not survive.
    """

    skip_forward_signature_validation = True  # `forward` takes **kwargs: the schema is the Guard's, not a signature

    def __init__(self, name: str, description: str, schema: dict[str, Any], fn: Callable[..., str]) -> None:
        self.name, self.description, self.output_type, self.fn = name, description, "string", fn
        required = set(schema.get("required", ()))
        self.inputs = {
            key: {"description": key, "type": "any", **prop} | ({} if key in required else {"nullable": True})
            for key, prop in schema.get("properties", {}).items()
        }
        super().__init__()

    def forward(self, **kwargs: Any) -> str:
        return self.fn(**kwargs)


class GuardedAgent(ToolCallingAgent):
    """A `ToolCallingAgent` whose tool calls, all but its own `final_answer`, go to the Guard untouched.

    smolagents checks a call before running it (the tool exists, argument names and types) and makes a
    bad one an error step; here the Guard sees, records and answers it instead.
    """

    def __init__(self, boundary: ToolBoundary, **kwargs: Any) -> None:
        self.boundary, self._ids = boundary, {}
        super().__init__(**kwargs)

    def process_tool_calls(self, chat_message: ChatMessage, memory_step: ActionStep) -> Iterator[Any]:
        # execute_tool_call is not given the call's id; it is given the very arguments object, so map that.
        self._ids = {id(c.function.arguments): c.id for c in chat_message.tool_calls or ()}
        yield from super().process_tool_calls(chat_message, memory_step)

    def execute_tool_call(self, tool_name: str, arguments: Any) -> Any:
        if tool_name == "final_answer":
            return super().execute_tool_call(tool_name, arguments)
        # A dict when the model's arguments were JSON, else its text. smolagents' history has no is_error:
        # the observation's text says it.
        return self.boundary.call(tool_name, arguments, self._ids.get(id(arguments))).result


class Smolagents(Adapter):
    """Runner `smolagents`: `ToolCallingAgent.run`, capped by `max_steps`."""

    name = "smolagents"
    extra = "smolagents"
    distribution = "smolagents"
    apis = ("chat", "messages")
    knobs = (KNOB,)

    def native_cap(self, limits: Limits) -> NativeCap:
        """`max_steps=N` allows N action steps, one model call each; the wrap-up call after them is refused."""
        return NativeCap(knob=KNOB, value=limits.max_steps)

    def knob_defaults(self) -> dict[str, KnobDefault]:
        """`ToolCallingAgent` passes `max_steps` on to `MultiStepAgent.__init__`, whose default it is."""
        default = inspect.signature(MultiStepAgent.__init__).parameters["max_steps"].default
        return {KNOB: KnobDefault(value=default, source="smolagents.agents.MultiStepAgent.__init__(max_steps=)")}

    def version(self, model: ModelSpec | None = None) -> str:
        own = installed_version(self.distribution)
        if model is None or model.provider != "anthropic":
            return own
        return f"{own} + litellm {installed_version('litellm')}"

    def loop(self, task: str, session: RunSession) -> Finished:
        """Run the agent; the `StopRun` that refuses the wrap-up call propagates to `Adapter.run`."""
        with ExitStack() as stack:
            if self.api_for(session.model) == "messages":
                proxy = stack.enter_context(ModelProxy(session))
                model: Any = _messages_model(session, proxy.anthropic_base_url, proxy.token)
            else:
                # retry=False: smolagents' own retry of rate-limit errors (60 s waits) would add to the SDK's
                model = ChatModel(session.model.name, client=session.openai_client(is_async=False), retry=False)
            tools = [
                SchemaTool(t.name, t.description, t.parameters, _guarded(session.tools, t.name))
                for t in session.tools.tools
            ]
            # cap:begin
            cap = {} if session.cap is None else {"max_steps": session.cap}  # unset: MultiStepAgent's default
            # cap:end
            agent = GuardedAgent(
                session.tools,
                tools=tools,
                model=model,
                instructions=SYSTEM_PROMPT,  # placed inside smolagents' own system prompt template
                verbosity_level=LogLevel.OFF,  # its rich panels would go to the terminal
                **cap,
            )
            result = agent.run(task, return_full_result=True)
        wrap_up = agent.memory.steps[-1]
        if result.state == "max_steps_error" and wrap_up.token_usage is None:
            # The wrap-up call failed (the proxy's 403 when the gate refused it): smolagents returned the error as text.
            return session.conclude(None, session.stop)
        return session.conclude(None if result.output is None else str(result.output))


def _guarded(boundary: ToolBoundary, name: str) -> Callable[..., str]:
    """A tool body that calls the Guard (`GuardedAgent` calls it itself, with the model's arguments as sent)."""
    return lambda **kwargs: boundary.call(name, kwargs).result


def _messages_model(session: RunSession, base_url: str, key: str) -> MessagesModel:
    """LiteLLM on the run's proxy, offline: it fetches a price map over the network at import otherwise."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no per-run switch: read at import
    try:
        import litellm
    except ImportError:
        raise MissingExtra("smolagents", "smolagents", "litellm") from None
    litellm.suppress_debug_info = True  # else it prints a provider list for a model it has no price for
    # LiteLLM retries nothing unless told: the same retry policy as every SDK client looplab builds.
    retries = session.model.retries
    return MessagesModel(
        f"anthropic/{session.model.name}", api_base=base_url, api_key=key, retry=False, num_retries=retries
    )


def bare_run(task: str, tools: Sequence[BareTool], urls: dict[str, str], model: str, max_steps: int) -> int:
    """The same agent with plain tools and a plain OpenAI client, none of looplab's boundaries.

    Tool calls take smolagents' own path here (its argument checks, then the function). Returns the model
    requests made: one per action step in memory (the wrap-up call at the cap is one too).
    """
    import openai

    url = urls["openai"]
    client = openai.OpenAI(api_key="not-needed", base_url=url, http_client=plain_http_client(openai, url))
    agent = ToolCallingAgent(
        tools=[SchemaTool(t.name, t.description, t.parameters, t.fn) for t in tools],
        model=ChatModel(model, client=client, retry=False),
        instructions=SYSTEM_PROMPT,
        verbosity_level=LogLevel.OFF,
        max_steps=max_steps,
    )
    agent.run(task)
    return sum(isinstance(step, ActionStep) for step in agent.memory.steps)


ADAPTER = Smolagents()
