"""The four wire formats' requests, read into one neutral conversation.

The request models validate just what the scripted model relies on (extra
fields pass through), so a malformed request is a 400 with the reason. The
readers check the fields they take from the loosely typed parts (tool calls,
items, content blocks) the same way: a wrong type is a `MalformedRequest`.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator

from looplab.adapters.contract.agents import OFFERED
from looplab.adapters.contract.errors import LooplabException

__all__ = ["Conversation"]

#: A block of context a client puts in a user message around the task (Claude Code's `<system-reminder>` blocks:
#: the environment, the date, the agents it can start): read for the agents it lists, never as the task.
REMINDER = re.compile(r"\s*<system-reminder>.*</system-reminder>\s*\Z", re.S)
#: An agent such a block lists: `- name: what it does`.
LISTED_AGENT = re.compile(r"^- (?P<name>[\w-]+): (?P<description>.+)$", re.M)
#: A tool parameter that picks which agent to start: its description says it is the type of agent.
AGENT_TYPE = re.compile(r"\btype of\b.*\bagent\b", re.I)
#: How deep a request's JSON may nest. Real requests (tool schemas included) stay far below it; it keeps every
#: recursive walk over a request (repr, json.dumps) far from the interpreter's recursion limit.
MAX_NESTING = 256

#: How the scripted model plays: the same knowledge, a different manner (see `scenarios.scripted.policy`).
Persona = Literal["careful", "eager", "gullible", "sloppy", "snoop", "restless", "fanout", "noisy"]
PERSONAS: tuple[Persona, ...] = get_args(Persona)
#: The request header that names the persona; a request without it plays `careful`.
PERSONA_HEADER = "x-looplab-persona"
#: The request header that seeds a persona's chance (`noisy`'s mistakes); a request without it has the seed "".
SEED_HEADER = "x-looplab-seed"
#: The longest seed a request may send: a case id and a repeat fit many times over, and a longer header is refused
#: rather than hashed into the dice unseen.
MAX_SEED_CHARS = 256


class MalformedRequest(LooplabException, ValueError):
    """A request field of the wrong type, found while reading the conversation; the server answers 400."""


def persona_named(value: str | None) -> Persona:
    """The persona a request's `PERSONA_HEADER` names: `careful` when it has none.

    Any other value is a `MalformedRequest` (the server answers 400 naming the personas): a misspelt
    persona played as `careful` would pass for a run of the persona asked for.
    """
    if value is None:
        return "careful"
    if value in PERSONAS:
        return value  # type: ignore[return-value]
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    raise MalformedRequest(f"{PERSONA_HEADER}: {shown} is not a persona; send one of {', '.join(PERSONAS)}")


def seed_named(value: str | None) -> str:
    """The seed a request's `SEED_HEADER` sends: "" when it has none.

    One longer than `MAX_SEED_CHARS` is a `MalformedRequest` (the server answers 400), as an unknown persona is.
    """
    if value is None:
        return ""
    if len(value) > MAX_SEED_CHARS:
        raise MalformedRequest(f"{SEED_HEADER}: {len(value)} characters; a seed is at most {MAX_SEED_CHARS}")
    return value


def nested_deeper_than(value: Any, limit: int) -> bool:
    """Whether JSON-like `value` nests lists and dicts more than `limit` levels deep (iteratively: no recursion)."""
    level: list[Any] = [value] if isinstance(value, dict | list) else []  # the containers `depth` levels down
    for _depth in range(1, limit + 1):
        if not level:
            return False
        level = [
            child
            for node in level
            for child in (node.values() if isinstance(node, dict) else node)
            if isinstance(child, dict | list)
        ]
    return bool(level)


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="allow")


class ChatMessage(_Lenient):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict[str, Any]] | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None


class ChatRequest(_Lenient):
    model: str
    messages: list[ChatMessage] = Field(min_length=1)
    tools: list[dict[str, Any]] | None = None
    stream: bool = False
    stream_options: dict[str, Any] | None = None


class ResponsesRequest(_Lenient):
    model: str
    input: str | list[dict[str, Any]]
    instructions: str | None = None
    tools: list[dict[str, Any]] | None = None
    stream: bool = False
    previous_response_id: str | None = None

    @field_validator("previous_response_id")
    @classmethod
    def _stateless(cls, value: str | None) -> None:
        if value is not None:
            raise ValueError("not supported: this server keeps no state; send the whole conversation as input")


class AnthropicMessage(_Lenient):
    role: Literal["user", "assistant"]
    content: str | list[dict[str, Any]]


class MessagesRequest(_Lenient):
    model: str
    max_tokens: int = Field(ge=1)
    messages: list[AnthropicMessage] = Field(min_length=1)
    system: str | list[dict[str, Any]] | None = None
    tools: list[dict[str, Any]] | None = None
    stream: bool = False


class GeminiContent(_Lenient):
    role: str | None = None
    parts: list[dict[str, Any]] = Field(default_factory=list)


class GeminiRequest(_Lenient):
    """A `generateContent` body; the model and whether to stream come from the URL, not the body."""

    contents: list[GeminiContent] = Field(min_length=1)
    tools: list[dict[str, Any]] | None = None
    model: str = ""
    stream: bool = False
    #: A streamed reply asked for without `alt=sse`: all its chunks in one JSON array.
    json_array: bool = False


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    args: Any


@dataclass(frozen=True)
class ToolResult:
    call: ToolCall
    content: str
    is_error: bool


@dataclass
class Conversation:
    """What the policy reads: the task, the tools offered, each call with its result, and how to play."""

    task: str = ""
    model: str = ""
    #: From the request's `PERSONA_HEADER`, not from the model name: choosing a persona is not choosing a model.
    persona: Persona = "careful"
    #: From the request's `SEED_HEADER`: what a persona that plays by chance (`noisy`) seeds its dice with.
    seed: str = ""
    tools: list[str] = field(default_factory=list)
    results: list[ToolResult] = field(default_factory=list)
    assistant_turns: int = 0
    #: The offered tool that hands work to an agent which finds where a function is defined (its description says
    #: so: `contract.agents.OFFERED`), and the string parameters its question goes in; None when none is offered.
    delegate: str | None = None
    delegate_params: list[str] = field(default_factory=list)
    #: Where the delegating tool starts agents by type (`_offer_listed`): the parameter that names the agent, and the
    #: name of the one that finds definitions, as the conversation lists it.
    delegate_choice: dict[str, str] = field(default_factory=dict)
    #: The agents the conversation's context blocks list (`REMINDER`), by name: what each does.
    listed_agents: dict[str, str] = field(default_factory=dict)

    def delegate_args(self, question: str) -> dict[str, str]:
        """The delegating tool's arguments for `question`: it in every string parameter it needs, then the agent."""
        return {p: question for p in self.delegate_params} | self.delegate_choice

    def _offer_listed(self, tools: list[tuple[str, Any]]) -> None:
        """Where no tool's description says it delegates: a tool that starts an agent by type (a parameter whose
        description says it picks the type of agent), when the conversation lists an agent that finds definitions."""
        wanted = next((n for n, what in self.listed_agents.items() if OFFERED.search(what)), None)
        if self.delegate is not None or wanted is None:
            return
        for name, schema in tools:
            props = schema.get("properties") if isinstance(schema, dict) else None
            for param, spec in (props if isinstance(props, dict) else {}).items():
                if isinstance(spec, dict) and AGENT_TYPE.search(str(spec.get("description", ""))):
                    self._offer(name, f"{name}: {self.listed_agents[wanted]}", schema)
                    self.delegate_params = [p for p in self.delegate_params if p != param]
                    self.delegate_choice = {param: wanted}
                    return

    def _offer(self, name: str, description: Any, schema: Any) -> None:
        """Note the tool `name` if it is the first that delegates (`delegate`)."""
        if self.delegate is not None or not OFFERED.search(
            f"{name} {description if isinstance(description, str) else ''}"
        ):
            return
        props = schema.get("properties") if isinstance(schema, dict) else None
        props = props if isinstance(props, dict) else {}
        strings = [
            k for k, v in props.items() if isinstance(v, dict) and str(v.get("type", "string")).lower() == "string"
        ]
        required = schema.get("required") if isinstance(schema, dict) else None
        wanted = [k for k in strings if isinstance(required, list) and k in required]
        self.delegate, self.delegate_params = name, wanted or strings[:1]

    def _add_call(self, pending: dict[str, ToolCall], call_id: str, name: str, raw_args: Any) -> None:
        pending[call_id] = ToolCall(call_id, name, _decode_args(raw_args))

    def _add_result(self, pending: dict[str, ToolCall], call_id: str, content: str, is_error: bool) -> None:
        call = pending.pop(call_id, None) or ToolCall(call_id, "unknown", {})
        if wrapped := _envelope(content):  # some frameworks send a tool's text as {"error": text} or {"result": text}
            content, is_error = wrapped[0], is_error or wrapped[1]
        self.results.append(ToolResult(call, content, is_error or content.startswith(_ERROR_PREFIXES)))


#: Error observations over Chat Completions and Responses carry no flag; their text starts like this.
_ERROR_PREFIXES = (
    "FileNotFoundError:",
    "PathRefused:",
    "InvalidArguments:",
    "UnknownTool:",
    "TimeoutError:",
    "ApprovalDenied:",
    "RepetitionStopped:",
    "IsADirectoryError:",
    "ToolError:",
    "Error:",
)


#: smolagents' ToolCallingAgent sends its history as text, not as tool messages: each step an assistant message
#: ending in "Calling tools:" and the Python repr of its calls, then a user message "Observation:" with their
#: results joined into one text.
_TEXT_CALLS = "Calling tools:\n"
_TEXT_RESULTS = "Observation:\n"
#: What parsing a Python literal can raise on hostile text (deep nesting, NUL bytes).
_UNPARSABLE_LITERAL = (SyntaxError, ValueError, TypeError, RecursionError, MemoryError)


def _text_protocol(conv: Conversation, pending: dict[str, ToolCall], role: str, text: str) -> None:
    """Tool calls and their results that a framework wrote as text (smolagents), read like native ones."""
    at = text.rfind(_TEXT_CALLS) if role == "assistant" else -1
    if at >= 0:
        try:
            calls = ast.literal_eval(text[at + len(_TEXT_CALLS) :].strip())
        except _UNPARSABLE_LITERAL:
            return
        for i, call in enumerate(calls if isinstance(calls, list) else []):
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict) and isinstance(fn.get("name"), str):
                conv._add_call(pending, str(call.get("id", i)), fn["name"], fn.get("arguments"))
    elif role == "user" and text.startswith(_TEXT_RESULTS) and pending:
        # One text for all the step's calls, with nothing to tell where one result ends: it is read as the last
        # call's result and the others' as empty (the policy asks again for what it still needs).
        *first, last = pending
        for call_id in first:
            conv._add_result(pending, call_id, "", False)
        conv._add_result(pending, last, text[len(_TEXT_RESULTS) :], False)


def _envelope(content: str) -> tuple[str, bool] | None:
    """The text inside `{"error": text}` (or `{"error": {"details": text}}`, LangChain.js's Gemini error), or inside
    `{"result": text}` (how ADK's Chat Completions path sends every tool result), and whether it is an error."""
    if not content.startswith(('{"error"', '{"result"')):
        return None
    try:
        decoded = json.loads(content)
    except (ValueError, RecursionError):
        return None
    if isinstance(error := decoded.get("error"), dict) and error.keys() == {"details"}:
        error = error["details"]
    if isinstance(error, str):
        return error, True
    result = decoded.get("result")
    return (result, False) if isinstance(result, str) and len(decoded) == 1 else None


def _decode_args(raw: Any) -> Any:
    """JSON text arguments decoded; text that is not JSON (or nests too deep to handle) stays text."""
    if isinstance(raw, str):
        try:
            decoded = json.loads(raw or "{}")
        except (ValueError, RecursionError):
            return raw
        return raw if nested_deeper_than(decoded, MAX_NESTING) else decoded
    return raw


_JSON_TYPES = {dict: "an object", list: "an array", bool: "a boolean", int: "a number", float: "a number"}


def _field(obj: dict[str, Any], key: str, where: str) -> str:
    """A string field a reader relies on: absent or null reads as empty, any other type is a malformed request."""
    value = obj.get(key)
    if value is None or isinstance(value, str):
        return value or ""
    raise MalformedRequest(f"{where}.{key}: expected a string, got {_JSON_TYPES.get(type(value), 'a value')}")


def _object(obj: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    """An object field a reader looks into: absent or null reads as empty, any other type is a malformed request."""
    value = obj.get(key)
    if value is None or isinstance(value, dict):
        return value or {}
    raise MalformedRequest(f"{where}.{key}: expected an object, got {_JSON_TYPES.get(type(value), 'a value')}")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


def from_chat(req: ChatRequest) -> Conversation:
    tools = [
        _field(_object(t, "function", f"tools.{i}"), "name", f"tools.{i}.function")
        for i, t in enumerate(req.tools or [])
    ]
    conv = Conversation(model=req.model, tools=tools)
    for t in req.tools or []:
        fn = t.get("function") if isinstance(t.get("function"), dict) else {}
        conv._offer(str(fn.get("name")), fn.get("description"), fn.get("parameters"))
    pending: dict[str, ToolCall] = {}
    for m, msg in enumerate(req.messages):
        if msg.role == "user" and not conv.task:
            conv.task = _text(msg.content)
        elif msg.role == "assistant":
            conv.assistant_turns += 1
            _text_protocol(conv, pending, "assistant", _text(msg.content))
            for c, call in enumerate(msg.tool_calls or []):
                where = f"messages.{m}.tool_calls.{c}"
                fn = _object(call, "function", where)
                conv._add_call(
                    pending, _field(call, "id", where), _field(fn, "name", f"{where}.function"), fn.get("arguments")
                )
        elif msg.role == "tool":
            conv._add_result(pending, msg.tool_call_id or "", _text(msg.content), False)
        elif msg.role == "user":
            _text_protocol(conv, pending, "user", _text(msg.content))
    return conv


def from_responses(req: ResponsesRequest) -> Conversation:
    offered = [
        _field(t, "name", f"tools.{i}")
        for i, t in enumerate(req.tools or [])
        if t.get("type", "function") == "function"
    ]
    conv = Conversation(model=req.model, tools=offered)
    for t in req.tools or []:
        conv._offer(str(t.get("name")), t.get("description"), t.get("parameters"))
    items = [{"role": "user", "content": req.input}] if isinstance(req.input, str) else req.input
    pending: dict[str, ToolCall] = {}
    last_was_call = False
    for i, item in enumerate(items):
        kind, where = item.get("type", "message"), f"input.{i}"
        if kind == "message" and item.get("role") == "user" and not conv.task:
            conv.task = _text(item.get("content"))
        elif kind == "message" and item.get("role") == "assistant":
            conv.assistant_turns += 1
        elif kind == "function_call":
            conv.assistant_turns += 0 if last_was_call else 1
            conv._add_call(pending, _field(item, "call_id", where), _field(item, "name", where), item.get("arguments"))
        elif kind == "function_call_output":
            conv._add_result(pending, _field(item, "call_id", where), _text(item.get("output")), False)
        last_was_call = kind == "function_call"
    return conv


def _context(conv: Conversation, text: str) -> bool:
    """Whether a user message's text block is a context block (`REMINDER`): its listed agents are noted."""
    if not REMINDER.match(text):
        return False
    conv.listed_agents |= {m["name"]: m["description"] for m in LISTED_AGENT.finditer(text)}
    return True


def from_messages(req: MessagesRequest) -> Conversation:
    conv = Conversation(model=req.model, tools=[_field(t, "name", f"tools.{i}") for i, t in enumerate(req.tools or [])])
    for t in req.tools or []:
        conv._offer(str(t.get("name")), t.get("description"), t.get("input_schema"))
    pending: dict[str, ToolCall] = {}
    for m, msg in enumerate(req.messages):
        blocks = [{"type": "text", "text": msg.content}] if isinstance(msg.content, str) else msg.content
        if msg.role == "assistant":
            conv.assistant_turns += 1
        for b, block in enumerate(blocks):
            kind, where = block.get("type"), f"messages.{m}.content.{b}"
            if kind == "text" and msg.role == "user" and _context(conv, _field(block, "text", where)):
                continue
            if kind == "text" and msg.role == "user" and not conv.task:
                conv.task = _field(block, "text", where)
            elif kind == "text":
                _text_protocol(conv, pending, msg.role, _field(block, "text", where))
            elif kind == "tool_use":
                conv._add_call(pending, _field(block, "id", where), _field(block, "name", where), block.get("input"))
            elif kind == "tool_result":
                conv._add_result(
                    pending,
                    _field(block, "tool_use_id", where),
                    _text(block.get("content")),
                    bool(block.get("is_error")),
                )
    conv._offer_listed([(str(t.get("name")), t.get("input_schema")) for t in req.tools or []])
    return conv


def _either(obj: dict[str, Any], camel: str, snake: str) -> Any:
    """A field Gemini's API takes in either spelling (the JSON of a protocol buffer: camelCase or snake_case)."""
    return obj.get(camel) if obj.get(camel) is not None else obj.get(snake)


def _gemini_result(response: Any) -> str:
    """A `functionResponse.response` as the tool's text: its `output` (google-genai's own wrapping; Strands' is a
    list of text parts), `return_value` (Pydantic AI's) or `content` (LiteLLM's) when that is all it holds, or its
    `content` beside the tool's `name` (the AI SDK's), else its JSON (`{"result": text}` and `{"error": text}` then
    read as other formats' are)."""
    if isinstance(response, dict) and response.keys() == {"name", "content"} and isinstance(response["content"], str):
        return response["content"]
    if isinstance(response, dict) and len(response) == 1:
        text = response.get("output", response.get("return_value", response.get("content")))
        if isinstance(text, list) and all(isinstance(p, dict) and isinstance(p.get("text"), str) for p in text):
            text = "".join(p["text"] for p in text)
        if isinstance(text, str):
            return text
    return json.dumps(response)


def from_gemini(req: GeminiRequest) -> Conversation:
    declared = [_either(tool, "functionDeclarations", "function_declarations") or [] for tool in req.tools or []]
    conv = Conversation(
        model=req.model,
        tools=[
            _field(d, "name", f"tools.{t}.functionDeclarations.{i}")
            for t, declarations in enumerate(declared)
            for i, d in enumerate(declarations if isinstance(declarations, list) else [])
            if isinstance(d, dict)
        ],
    )
    for declarations in declared:
        for d in declarations if isinstance(declarations, list) else []:
            if isinstance(d, dict):
                schema = d.get("parameters") or _either(d, "parametersJsonSchema", "parameters_json_schema")
                conv._offer(str(d.get("name")), d.get("description"), schema)
    pending: dict[str, ToolCall] = {}
    for c, content in enumerate(req.contents):
        if content.role == "model":
            conv.assistant_turns += 1
        for p, part in enumerate(content.parts):
            where = f"contents.{c}.parts.{p}"
            call = _either(part, "functionCall", "function_call")
            result = _either(part, "functionResponse", "function_response")
            if isinstance(text := part.get("text"), str) and content.role != "model" and not conv.task:
                conv.task = text
            elif isinstance(text, str):
                _text_protocol(conv, pending, "assistant" if content.role == "model" else "user", text)
            elif call is not None:
                if not isinstance(call, dict):
                    raise MalformedRequest(f"{where}.functionCall: expected an object")
                name = _field(call, "name", f"{where}.functionCall")
                # An id is optional on Gemini's wire: without one, a call is matched to its result by name.
                call_id = _field(call, "id", f"{where}.functionCall") or f"{name}#{c}.{p}"
                conv._add_call(pending, call_id, name, call.get("args") or {})
            elif result is not None:
                if not isinstance(result, dict):
                    raise MalformedRequest(f"{where}.functionResponse: expected an object")
                name = _field(result, "name", f"{where}.functionResponse")
                call_id = _field(result, "id", f"{where}.functionResponse")
                if call_id not in pending:
                    call_id = next((k for k, pended in pending.items() if pended.name == name), call_id)
                    pending.setdefault(call_id, ToolCall(call_id, name, {}))
                conv._add_result(pending, call_id, _gemini_result(result.get("response")), False)
    return conv
