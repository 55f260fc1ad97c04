"""smolagents' pieces the `smolagents` runner assembles: its models answering in text, a tool, the guarded agent.

A `GuardedAgent` sends every tool call but `final_answer` and its managed agents' to the Guard untouched. A managed
agent (smolagents' own delegation, `managed_agents=[...]`) is offered to its parent as a tool named after it, with
a `task` string (`MultiStepAgent._setup_managed_agents`); the parent calls it through `MultiStepAgent.__call__`,
which wraps the task in its `managed_agent.task` prompt and the answer in its `managed_agent.report` one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from rich.console import Console
from smolagents import LiteLLMModel, LogLevel, OpenAIModel, Tool, ToolCallingAgent
from smolagents.memory import ActionStep
from smolagents.models import ChatMessage, ChatMessageToolCall, ChatMessageToolCallFunction
from smolagents.monitoring import AgentLogger

from looplab.adapters.contract.bare import BareTool
from looplab.adapters.contract.tools import ToolBoundary
from looplab.shared_tools import Tool as GuardTool


class TextAnswers:
    """Mixed into a smolagents model: a reply without tool calls is the answer, as every other runner takes it."""

    def parse_tool_calls(self, message: ChatMessage) -> ChatMessage:
        # Called on a reply without tool calls, which smolagents would make an error step costing another call.
        call = ChatMessageToolCallFunction(name="final_answer", arguments={"answer": message.content or ""})
        message.tool_calls = [ChatMessageToolCall(function=call, id="text-reply", type="function")]
        return message


class ChatModel(TextAnswers, OpenAIModel): ...  # Chat Completions on a given `openai.OpenAI` client


class LiteLLMTextModel(TextAnswers, LiteLLMModel): ...  # Anthropic Messages and Gemini through LiteLLM


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
    """A `ToolCallingAgent` whose tool calls, all but its own `final_answer` and its managed agents', go to the
    Guard untouched."""

    def __init__(self, boundary: ToolBoundary, **kwargs: Any) -> None:
        self.boundary, self._ids = boundary, {}
        super().__init__(**kwargs)

    def process_tool_calls(self, chat_message: ChatMessage, memory_step: ActionStep) -> Iterator[Any]:
        # execute_tool_call is not given the call's id; it is given the very arguments object, so map that.
        self._ids = {id(c.function.arguments): c.id for c in chat_message.tool_calls or ()}
        yield from super().process_tool_calls(chat_message, memory_step)

    def execute_tool_call(self, tool_name: str, arguments: Any) -> Any:
        if tool_name == "final_answer" or tool_name in self.managed_agents:  # a managed agent: `agent(task=...)`
            return super().execute_tool_call(tool_name, arguments)
        # No smolagents checks (the tool exists, argument names and types): they make a bad call an error step.
        # A dict when the model's arguments were JSON, else its text. No is_error in its history: the text says it.
        return self.boundary.call(tool_name, arguments, self._ids.get(id(arguments))).result


def guarded_agent(
    boundary: ToolBoundary, model: Any, instructions: str, *, stream: bool, **kwargs: Any
) -> GuardedAgent:
    """A `GuardedAgent` with the run's tools on `model`; `instructions` go inside smolagents' system prompt. `stream`:
    each step asks `model.generate_stream` (smolagents' `stream_outputs`, usage included) instead of `generate`."""
    return GuardedAgent(
        boundary,
        tools=[SchemaTool(t, _guarded(boundary, t.name)) for t in boundary.tools],
        model=model,
        instructions=instructions,  # placed inside smolagents' own system prompt template
        # Its rich panels would go to the terminal; a streamed step draws a `Live` one whatever the level
        # (smolagents/agents.py:1300), so its console prints nothing either.
        logger=AgentLogger(LogLevel.OFF, console=Console(quiet=True)),
        stream_outputs=stream,
        **kwargs,
    )


def _guarded(boundary: ToolBoundary, name: str) -> Callable[..., str]:
    """A tool body that calls the Guard (`GuardedAgent` calls it itself, with the model's arguments as sent)."""
    return lambda **kwargs: boundary.call(name, kwargs).result
