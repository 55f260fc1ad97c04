"""The normalized trace: steps of one model call plus the tool calls it asked for.

A trace is assembled from the two boundaries' logs (the model recorder's
calls and the Guard's tool records), never from a framework's own history,
so every runner's trace means the same thing.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from pydantic import BaseModel, ConfigDict, Field

from looplab.adapters.contract.wire_apis import API_OF_ENDPOINT
from looplab.shared_tools.records import ToolCallRecord

__all__ = ["Attempt", "ModelCall", "Step", "Trace", "api_of"]


def api_of(endpoint: str) -> str:
    """The wire API a recorded endpoint belongs to (an unknown endpoint names itself)."""
    return API_OF_ENDPOINT.get(endpoint, endpoint)


class Attempt(BaseModel):
    """One HTTP attempt at the model that got no answer: an error status, a broken connection, a timeout."""

    step: int = Field(description="1-based index of the model call (answered or not) this attempt was for.")
    attempt: int = Field(description="1-based number of this attempt within its step.")
    endpoint: str
    status: int | None = Field(description="The HTTP status; None when no response came (connection, timeout).")
    error: str = Field(description="The server's message, trimmed, or the exception that ended the attempt.")
    request_bytes: int
    response_bytes: int
    started_at: float
    latency_s: float


class ModelCall(BaseModel):
    """One model request and its response, as seen on the wire."""

    index: int = Field(description="1-based position among the run's model calls.")
    endpoint: str = Field(description="chat.completions, responses or messages.")
    url: str
    status: int
    streamed: bool
    request_bytes: int
    response_bytes: int
    input_tokens: int = Field(description="Every input token, those read from or written to a prompt cache included.")
    output_tokens: int
    cached_input_tokens: int = Field(0, description="Input tokens read from the provider's prompt cache.")
    cache_write_tokens: int = Field(0, description="Input tokens written to the provider's prompt cache (Anthropic).")
    usage_estimated: bool = Field(
        False,
        description="The response carried no usable usage (none, or a count that was negative, not an integer or "
        "past 10^12); tokens estimated from bytes.",
    )
    finish_reason: str | None
    tool_calls_requested: list[str]
    started_at: float = Field(description="Seconds on the run's clock when the request was sent.")
    latency_s: float
    cost_usd: float | None = Field(description="Dollars at the model's price; None when the model has no price.")
    failed_attempts: list[Attempt] = Field(
        default_factory=list, description="Attempts at this call that got no answer before this one did (retries)."
    )
    agent: str | None = Field(
        None,
        description="Which agent made it, in a run with more than one (the tool calls of its step are that "
        "agent's too); None in a run of one agent.",
    )


class Step(BaseModel):
    """One model call and the tool calls that followed it."""

    model_config = ConfigDict(protected_namespaces=())

    index: int
    model_call: ModelCall
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)


class Trace(BaseModel):
    """Ordered steps; tool calls made before any model call (none expected) are kept apart.

    `unanswered` holds the attempts at a model call that never got an answer (the run ended on them).
    """

    steps: list[Step] = Field(default_factory=list)
    orphan_tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    unanswered: list[Attempt] = Field(default_factory=list)

    @classmethod
    def from_boundaries(
        cls,
        model_calls: Iterable[ModelCall],
        tool_calls: Iterable[ToolCallRecord],
        unanswered: Iterable[Attempt] = (),
    ) -> Trace:
        """Attribute each tool call to the latest model call sent before it."""
        steps = [Step(index=i, model_call=call) for i, call in enumerate(sorted(model_calls, key=_start), 1)]
        orphans: list[ToolCallRecord] = []
        for record in sorted(tool_calls, key=lambda r: r.started_at):
            owner = next((s for s in reversed(steps) if s.model_call.started_at <= record.started_at), None)
            (owner.tool_calls if owner else orphans).append(record)
        return cls(steps=steps, orphan_tool_calls=orphans, unanswered=list(unanswered))

    @property
    def failed_attempts(self) -> list[Attempt]:
        """Every model attempt that got no answer, in order."""
        return [a for step in self.steps for a in step.model_call.failed_attempts] + self.unanswered

    @property
    def tool_calls(self) -> list[ToolCallRecord]:
        return [call for step in self.steps for call in step.tool_calls] + self.orphan_tool_calls

    @property
    def apis(self) -> list[str]:
        """The wire APIs the model calls went through (answered or not), in order of first use."""
        endpoints = [s.model_call.endpoint for s in self.steps] + [a.endpoint for a in self.unanswered]
        return list(dict.fromkeys(map(api_of, endpoints)))

    def trajectory(self) -> list[str]:
        """Tool names in order, with the step's first argument: 'read_file(tests/x.py)'."""
        return [f"{c.name}({c.first_arg})" for c in self.tool_calls]

    def jsonl(self) -> Iterator[str]:
        """One JSON line per step."""
        for step in self.steps:
            yield step.model_dump_json()


def _start(call: ModelCall) -> float:
    return call.started_at
