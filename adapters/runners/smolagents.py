"""smolagents: a `ToolCallingAgent` (native tool calls; `CodeAgent` is out of scope) and `agent.run(task)`.

OpenAI Chat Completions goes through `OpenAIModel(client=...)` on the session's recorded client; Anthropic Messages
and Gemini's generateContent (not streamed) through `LiteLLMModel`, which builds its own HTTP client, pointed at the
run's recording proxy. smolagents sends its history as text, not as tool messages: each step is an assistant message
"Calling tools: [...]" and a user message "Observation: ..." (one for all the step's calls). `max_steps=N` allows N
action steps; the wrap-up call smolagents makes after them is refused at the model boundary, and the run ends
`max_steps` (measured: docs/iteration-caps.md, the same on every API).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import nullcontext
from typing import Any

from smolagents import LiteLLMModel, LogLevel, OpenAIModel, Tool, ToolCallingAgent
from smolagents.agents import MultiStepAgent
from smolagents.memory import ActionStep
from smolagents.models import ChatMessage, ChatMessageToolCall, ChatMessageToolCallFunction
from smolagents.utils import AgentMaxStepsError

from looplab.adapters.boundary.plain import plain_openai_client
from looplab.adapters.boundary.proxy import ModelProxy
from looplab.adapters.contract.bare import BareRun, BareTool
from looplab.adapters.contract.limits import Limits
from looplab.adapters.contract.result import Finished, NativeCap
from looplab.adapters.contract.runner import KnobDefault, signature_default
from looplab.adapters.contract.tools import ToolBoundary
from looplab.adapters.runners._litellm import LITELLM_APIS, ViaLiteLLM, litellm_route
from looplab.adapters.session import Adapter, RunSession
from looplab.shared_tools import Tool as GuardTool

__all__ = ["ADAPTER", "GuardedAgent", "KNOB", "SchemaTool", "Smolagents", "TextAnswers", "bare_run"]

KNOB = "ToolCallingAgent(max_steps=)"


class TextAnswers:
    """Mixed into a smolagents model: a reply without tool calls is the answer, as every other runner takes it."""

    def parse_tool_calls(self, message: ChatMessage) -> ChatMessage:
        # Called on a reply without tool calls, which smolagents would make an error step costing another call.
        call = ChatMessageToolCallFunction(name="final_answer", arguments={"answer": message.content or ""})
        message.tool_calls = [ChatMessageToolCall(function=call, id="text-reply", type="function")]
        return message


class _ChatModel(TextAnswers, OpenAIModel): ...  # Chat Completions on a given `openai.OpenAI` client


class _LiteLLMModel(TextAnswers, LiteLLMModel): ...  # Anthropic Messages and Gemini through LiteLLM


class SchemaTool(Tool):
    """A tool as smolagents declares it: the Guard's name and description, `inputs` from its JSON schema."""

    skip_forward_signature_validation = True  # `forward` takes **kwargs: the schema is the Guard's, not a signature

    def __init__(self, tool: GuardTool | BareTool, fn: Callable[..., str]) -> None:
        self.name, self.description, self.output_type, self.fn = tool.name, tool.description, "string", fn
        schema, required = tool.parameters, set(tool.parameters.get("required", ()))
        self.inputs = {  # the schema smolagents sends is rebuilt from these: `additionalProperties` does not survive
            key: {"description": key, "type": "any", **prop} | ({} if key in required else {"nullable": True})
            for key, prop in schema.get("properties", {}).items()
        }
        super().__init__()

    def forward(self, **kwargs: Any) -> str:
        return self.fn(**kwargs)


class GuardedAgent(ToolCallingAgent):
    """A `ToolCallingAgent` whose tool calls, all but its own `final_answer`, go to the Guard untouched."""

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
        # No smolagents checks (the tool exists, argument names and types): they make a bad call an error step.
        # A dict when the model's arguments were JSON, else its text. No is_error in its history: the text says it.
        return self.boundary.call(tool_name, arguments, self._ids.get(id(arguments))).result


class Smolagents(ViaLiteLLM, Adapter):
    """Runner `smolagents`: `ToolCallingAgent.run`, capped by `max_steps`."""

    name = "smolagents"
    summary = "smolagents ToolCallingAgent (max_steps)"
    requires = ("smolagents", "openai")
    listed = 80
    extra = "smolagents"
    distribution = "smolagents"
    apis = ("chat", "messages", "gemini")
    knobs = (KNOB,)

    def native_cap(self, limits: Limits) -> NativeCap:
        """`max_steps=N` allows N action steps, one model call each; the wrap-up call after them is refused."""
        return NativeCap(knob=KNOB, value=limits.max_steps)

    def knob_defaults(self) -> dict[str, KnobDefault]:
        """`ToolCallingAgent` passes `max_steps` on to `MultiStepAgent.__init__`, whose default it is."""
        return {KNOB: signature_default(MultiStepAgent.__init__, "max_steps")}

    def loop(self, task: str, session: RunSession) -> Finished:
        """Run the agent; the `StopRun` that refuses the wrap-up call propagates to `Adapter.run`."""
        api = self.api_for(session.model)
        with ModelProxy(session) if api in LITELLM_APIS else nullcontext() as proxy:
            # retry=False: smolagents' own retry of rate-limit errors (60 s waits) would add to the SDK's
            if proxy is None:
                model: Any = _ChatModel(session.model.name, client=session.openai_client(is_async=False), retry=False)
            else:  # LiteLLM on the run's proxy, offline and quiet (`adapters/runners/_litellm.py`)
                # LiteLLM retries nothing unless told: the same retry policy as every SDK client looplab builds.
                name, url = litellm_route(self.name, self.extra, api, session.model.name, proxy)
                retries = session.model.retries
                model = _LiteLLMModel(name, api_base=url, api_key=proxy.token, retry=False, num_retries=retries)
            # cap:begin
            cap = {} if session.cap is None else {"max_steps": session.cap}  # unset: MultiStepAgent's default
            # cap:end
            agent = GuardedAgent(
                session.tools,
                tools=[SchemaTool(t, _guarded(session.tools, t.name)) for t in session.tools.tools],
                model=model,
                instructions=session.system_prompt,  # placed inside smolagents' own system prompt template
                verbosity_level=LogLevel.OFF,  # its rich panels would go to the terminal
                **cap,
            )
            # The output alone: a full result serializes the whole memory, every step, after the run.
            output = agent.run(task)
        last = agent.memory.steps[-1]
        if isinstance(getattr(last, "error", None), AgentMaxStepsError) and last.token_usage is None:
            # The wrap-up call failed (the proxy's 403 when the gate refused it): smolagents returned the error as text.
            return session.conclude(None, session.stop)
        return session.conclude(None if output is None else str(output))

    def bare_loop(self) -> BareRun:
        return bare_run


def _guarded(boundary: ToolBoundary, name: str) -> Callable[..., str]:
    """A tool body that calls the Guard (`GuardedAgent` calls it itself, with the model's arguments as sent)."""
    return lambda **kwargs: boundary.call(name, kwargs).result


def bare_run(
    task: str, tools: Sequence[BareTool], urls: dict[str, str], model: str, max_steps: int, *, system_prompt: str
) -> int:
    """The same agent on a plain client and plain tools (smolagents' own checks, then the function).

    Returns the model requests made: one per action step in memory (the wrap-up call at the cap is one too).
    """
    agent = ToolCallingAgent(
        tools=[SchemaTool(t, t.fn) for t in tools],
        model=_ChatModel(model, client=plain_openai_client(urls["openai"], is_async=False), retry=False),
        instructions=system_prompt,
        verbosity_level=LogLevel.OFF,
        max_steps=max_steps,
    )
    agent.run(task)
    return sum(isinstance(step, ActionStep) for step in agent.memory.steps)


ADAPTER = Smolagents()
