"""DSPy's text-field protocol, read into a `Conversation` and written back as the reply a model would write.

DSPy's `ReAct` asks for its next step as text fields rather than native tool calls. The system message
lists the signature's fields (`Your input fields are: ...`, `Your output fields are: ...`); the last user
message carries each input field under a `[[ ## name ## ]]` header, the `trajectory` field holding the steps
so far as `thought_i`, `tool_name_i`, `tool_args_i` (JSON) and `observation_i`. The reply fills the output
fields the same way and ends with `[[ ## completed ## ]]`. After a reply DSPy cannot parse, its adapter asks
again in the JSON format (`Respond with a JSON object ...`), answered here in kind.

Two kinds of request: a *react* step (output `next_thought`, `next_tool_name`, `next_tool_args`; the tools
offered are the `next_tool_name` field's allowed values, `finish` among them) and an *extract* step (a
chain of thought over the finished trajectory: `reasoning`, then the signature's outputs such as `answer`).
Both are decided by the unchanged policy from what the trajectory's observations say. A decision with
several calls goes out one call a reply, in order (the field holds one tool): see `decide`. An answer is
the `finish` tool, its text the thought. An extract step is answered with the policy's answer, or with an
empty answer when the policy still wants a tool (the scripted model does not guess).

A header inside a value (an observation holding a line `[[ ## thought_2 ## ]]`) reads as the next field,
as it does for DSPy's own parser; the reader only takes the header that is due next, so other such lines
stay in the value.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import count
from typing import Any, Literal

from looplab.scenarios.scripted.conversation import (
    ChatRequest,
    Conversation,
    GeminiRequest,
    MessagesRequest,
    Persona,
    ToolCall,
    _either,
    _text,
)
from looplab.scenarios.scripted.policy import Call, Decision

FINISH = "finish"
HEADER = re.compile(r"^\[\[ ## (\w+) ## \]\][ \t]*$", re.M)
#: `1. `next_tool_name` (Literal['read_file', 'finish']): ...` in the system message's field lists.
FIELD_LINE = re.compile(r"^\d+\. `(\w+)` \((.*?)\):", re.M)
#: The format reminders DSPy's adapters end the user message with.
CHAT_REMINDER = "Respond with the corresponding output fields"
JSON_REMINDER = "Respond with a JSON object"
#: The observation DSPy writes when a tool raised.
EXECUTION_ERROR = "Execution error in "
STEP_KEYS = ("thought", "tool_name", "tool_args", "observation")
#: How DSPy's ReAct lists a tool in its instructions: `(1) read_file, whose description is <desc>...</desc>. It takes
#: arguments {...}.` (the description is what tells the policy a tool delegates).
TOOL_LINE = re.compile(
    r"^\s*\(\d+\) (\w+), whose description is <desc>(.*?)</desc>\. It takes arguments (\{.*\})\.\s*$", re.M
)
#: A longer trajectory is not replayed to find a batch in progress (the replay costs steps squared).
MAX_REPLAY_STEPS = 200


@dataclass(frozen=True)
class Step:
    """One trajectory step as DSPy wrote it: the thought, the tool, its arguments (JSON text), what came back."""

    thought: str
    tool_name: str
    tool_args: str
    observation: str


@dataclass(frozen=True)
class FieldRequest:
    """One request in the field protocol: what is asked, in which format, and the trajectory so far."""

    kind: Literal["react", "extract"]
    fmt: Literal["chat", "json"]
    outputs: tuple[str, ...]
    task: str
    model: str
    tools: tuple[str, ...]
    steps: tuple[Step, ...]
    #: How to play: the request's persona header, as for a request in any protocol.
    persona: Persona = "careful"
    #: Each tool's description and argument properties, as the instructions list them (`TOOL_LINE`).
    described: tuple[tuple[str, str, dict[str, Any]], ...] = ()

    def conversation(self, upto: int | None = None) -> Conversation:
        """The conversation of the first `upto` steps (all of them by default), as the policy reads one."""
        conv = Conversation(task=self.task, model=self.model, tools=list(self.tools), persona=self.persona)
        for name, description, properties in self.described:
            conv._offer(name, description, {"type": "object", "properties": properties})
        pending: dict[str, ToolCall] = {}
        for i, step in enumerate(self.steps[:upto]):
            conv.assistant_turns += 1
            if step.tool_name == FINISH:  # the answer step, not a tool call
                continue
            conv._add_call(pending, f"step_{i}", step.tool_name, step.tool_args)
            conv._add_result(pending, f"step_{i}", step.observation, step.observation.startswith(EXECUTION_ERROR))
        return conv


def _field_list(system: str, title: str, until: str) -> dict[str, str]:
    """The fields (name -> type text) listed between `title` and `until` in the system message, in order."""
    start = system.find(title)
    if start == -1:
        return {}
    end = system.find(until, start)
    block = system[start : end if end != -1 else len(system)]
    return {m.group(1): m.group(2) for m in FIELD_LINE.finditer(block)}


def _choices(type_text: str) -> list[str]:
    """The allowed values of a `Literal[...]` type as DSPy writes it; [] for any other type."""
    if not type_text.startswith("Literal[") or not type_text.endswith("]"):
        return []
    try:
        values = ast.literal_eval(f"({type_text[len('Literal[') : -1]},)")
    except (ValueError, SyntaxError):
        return []
    return [str(v) for v in values]


def split_fields(text: str, keys: Iterable[str]) -> dict[str, str]:
    """The values under the `[[ ## key ## ]]` headers of `keys`, taken in order; a header counts only when due.

    A value is the text between its header line and the blank line before the next header, as DSPy joins
    fields (`header\\nvalue`, separated by a blank line).
    """
    found: list[tuple[str, int, int]] = []  # key, value start, header start
    due = iter(keys)
    key = next(due, None)
    for match in HEADER.finditer(text):
        if key is not None and match.group(1) == key:
            found.append((key, match.end(), match.start()))
            key = next(due, None)
    values: dict[str, str] = {}
    for i, (name, start, _) in enumerate(found):
        end = found[i + 1][2] if i + 1 < len(found) else len(text)
        values[name] = text[start:end].removeprefix("\n").removesuffix("\n\n")
    return values


def trajectory_keys() -> Iterator[str]:
    """The keys of a trajectory's steps, in DSPy's order: `thought_0`, `tool_name_0`, ..., `observation_0`, ..."""
    return (f"{key}_{i}" for i in count() for key in STEP_KEYS)


def read_trajectory(text: str) -> list[Step]:
    """The whole steps of a formatted trajectory (a step without its observation is not one)."""
    values = split_fields(text, trajectory_keys())
    steps: list[Step] = []
    while f"observation_{len(steps)}" in values:
        steps.append(Step(*(values[f"{key}_{len(steps)}"] for key in STEP_KEYS)))
    return steps


def read(messages: Sequence[tuple[str, str]], model: str) -> FieldRequest | None:
    """The field request in `messages` (role, text pairs), or None when they are not in DSPy's field protocol."""
    system = "\n".join(text for role, text in messages if role in ("system", "developer"))
    user = next((text for role, text in reversed(messages) if role == "user"), "")
    inputs = _field_list(system, "Your input fields are:", "Your output fields are:")
    outputs = _field_list(system, "Your output fields are:", "All interactions will be structured")
    if "trajectory" not in inputs or not outputs or "[[ ## trajectory ## ]]" not in user:
        return None
    fmt: Literal["chat", "json"] = "json" if JSON_REMINDER in user else "chat"
    for reminder in (CHAT_REMINDER, JSON_REMINDER):  # the reminder paragraph is not part of the last field
        if (at := user.rfind("\n\n" + reminder)) != -1:
            user = user[:at]
    values = split_fields(user, list(inputs))
    task = "\n\n".join(v for k, v in values.items() if k != "trajectory")
    tools = tuple(t for t in _choices(outputs.get("next_tool_name", "")) if t != FINISH)
    steps = tuple(read_trajectory(values.get("trajectory", "")))
    kind: Literal["react", "extract"] = "react" if "next_tool_name" in outputs else "extract"
    described = tuple((m[1], m[2], props) for m in TOOL_LINE.finditer(system) if (props := _tool_arguments(m[3])))
    return FieldRequest(kind, fmt, tuple(outputs), task, model, tools, steps, described=described)


def _tool_arguments(text: str) -> dict[str, Any] | None:
    """A tool's arguments as DSPy writes them (a Python dict literal of JSON Schema properties); None if not one."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def from_chat(req: ChatRequest) -> FieldRequest | None:
    """A Chat Completions request in the field protocol, or None."""
    return read([(m.role, _text(m.content)) for m in req.messages], req.model)


def from_messages(req: MessagesRequest) -> FieldRequest | None:
    """An Anthropic Messages request in the field protocol (its system prompt is a top-level field), or None."""
    system = [("system", _text(req.system))] if req.system else []
    return read([*system, *((m.role, _text(m.content)) for m in req.messages)], req.model)


def from_gemini(req: GeminiRequest) -> FieldRequest | None:
    """A Gemini request in the field protocol (its system prompt is the top-level `systemInstruction`), or None."""
    instruction = _either(req.model_extra or {}, "systemInstruction", "system_instruction")
    system = [("system", _text(instruction.get("parts")))] if isinstance(instruction, dict) else []
    turns = (("assistant" if c.role == "model" else "user", _text(c.parts)) for c in req.contents)
    return read([*system, *turns], req.model)


def _made(step: Step, call: Call) -> bool:
    """Whether `step` is `call`: the same tool with the same arguments (DSPy writes them back as JSON)."""
    try:
        args = json.loads(step.tool_args)
    except ValueError:
        args = step.tool_args
    return step.tool_name == call.name and args == call.args


def decide(request: FieldRequest, policy: Callable[[Conversation], Decision]) -> Decision:
    """The policy's decision for this request, its calls one a reply.

    A reply holds one tool, so a decision of several calls is served over as many replies. Stateless:
    the policy is asked again at each earlier decision point of the trajectory, and when the steps since
    the last one are the first calls of that decision, the rest of it is what comes next.
    """
    at, steps = 0, request.steps
    while at < len(steps) <= MAX_REPLAY_STEPS:
        calls = policy(request.conversation(at)).calls
        made = 0
        while made < len(calls) and at + made < len(steps) and _made(steps[at + made], calls[made]):
            made += 1
        if 0 < made < len(calls) and at + made == len(steps):  # in the middle of a batch
            return Decision(calls[made:])
        at += max(made, 1)
    return policy(request.conversation())


def _arguments(args: object) -> str:
    """Arguments as the model writes them: JSON, or the botched text a sloppy model wrote."""
    return args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)


def values_for(request: FieldRequest, decision: Decision) -> dict[str, str]:
    """Each output field's text for `decision` (`next_tool_args` is JSON text, possibly invalid)."""
    if request.kind == "react":
        if not decision.calls:
            return {"next_thought": decision.answer or "", "next_tool_name": FINISH, "next_tool_args": "{}"}
        first, *rest = decision.calls
        later = f" Then {', '.join(c.name for c in rest)}." if rest else ""
        return {
            "next_thought": f"Next I call {first.name}.{later}",
            "next_tool_name": first.name,
            "next_tool_args": _arguments(first.args),
        }
    if decision.answer is None:
        wanted = ", ".join(c.name for c in decision.calls)
        reasoning = f"The trajectory ended before the investigation did; it still needed {wanted}."
        return {name: reasoning if name == "reasoning" else "" for name in request.outputs}
    reasoning = "The trajectory's observations support this answer."
    return {name: reasoning if name == "reasoning" else decision.answer for name in request.outputs}


def render(request: FieldRequest, decision: Decision) -> str:
    """The reply text a model would write for `decision`, in the request's format."""
    values = values_for(request, decision)
    texts = [values.get(name, "") for name in request.outputs]
    if request.fmt == "json":
        parts = [
            f"{json.dumps(name)}: {text if name == 'next_tool_args' else json.dumps(text, ensure_ascii=False)}"
            for name, text in zip(request.outputs, texts, strict=True)
        ]
        return "{" + ", ".join(parts) + "}"
    fields = [f"[[ ## {name} ## ]]\n{text}" for name, text in zip(request.outputs, texts, strict=True)]
    return "\n\n".join([*fields, "[[ ## completed ## ]]"]) + "\n"


def reply(request: FieldRequest, policy: Callable[[Conversation], Decision]) -> Decision:
    """The policy's next step as the plain-text answer that carries its fields, for the wire formats to send."""
    return Decision(answer=render(request, decide(request, policy)))
