"""A `Decision` written out in each wire format, whole or as a stream of SSE events.

Each format has a `*_response` (the non-streaming body) and a `*_events`
(the `(event name, payload)` sequence a streaming client reads). Tests check
these shapes by parsing them with the real `openai`, `anthropic` and `google-genai` clients.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from looplab.scenarios.scripted.policy import Call, Decision

Event = tuple[str | None, dict[str, Any] | str]


@dataclass(frozen=True)
class Reply:
    """A decision with the ids, model name and token counts a response carries."""

    decision: Decision
    model: str
    turn: int
    input_tokens: int

    @property
    def call_ids(self) -> list[str]:
        return [f"call_{self.turn}_{i}" for i in range(len(self.decision.calls))]

    @property
    def output_tokens(self) -> int:
        text = self.decision.answer or "".join(arguments(c) for c in self.decision.calls)
        return estimate_tokens(text) + 4 * len(self.decision.calls)


def arguments(call: Call) -> str:
    """The call's arguments as JSON text (a sloppy model's may already be text, and invalid)."""
    return call.args if isinstance(call.args, str) else json.dumps(call.args)


def estimate_tokens(text: str | bytes) -> int:
    """About four characters a token, as providers' English text averages."""
    return max(1, (len(text) + 3) // 4)


def _id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


#: A streamed text or JSON goes out in pieces of this many characters, and in at most `MAX_PIECES` pieces: an
#: answer quoting a 10 MB line would otherwise take 200,000 events (seconds to write, 50 MB on the wire).
PIECE_CHARS = 48
MAX_PIECES = 256


def _chunks(text: str, size: int = PIECE_CHARS) -> list[str]:
    size = max(size, -(-len(text) // MAX_PIECES))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


# --- OpenAI Chat Completions -------------------------------------------------------


def chat_response(reply: Reply) -> dict[str, Any]:
    d = reply.decision
    message: dict[str, Any] = {"role": "assistant", "content": d.answer, "refusal": None}
    if d.calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": c.name, "arguments": arguments(c)}}
            for cid, c in zip(reply.call_ids, d.calls, strict=True)
        ]
    return {
        "id": _id("chatcmpl"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": reply.model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if d.calls else "stop", "logprobs": None}
        ],
        "usage": _chat_usage(reply),
    }


def _chat_usage(reply: Reply) -> dict[str, int]:
    return {
        "prompt_tokens": reply.input_tokens,
        "completion_tokens": reply.output_tokens,
        "total_tokens": reply.input_tokens + reply.output_tokens,
    }


def chat_events(reply: Reply, include_usage: bool) -> Iterator[Event]:
    d, base = (
        reply.decision,
        {"id": _id("chatcmpl"), "object": "chat.completion.chunk", "created": int(time.time()), "model": reply.model},
    )

    def chunk(delta: dict[str, Any], finish: str | None = None) -> Event:
        return None, {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}

    yield chunk({"role": "assistant", "content": ""})
    for part in _chunks(d.answer) if d.answer else []:
        yield chunk({"content": part})
    for i, (cid, call) in enumerate(zip(reply.call_ids, d.calls, strict=True)):
        head = {"index": i, "id": cid, "type": "function", "function": {"name": call.name, "arguments": ""}}
        yield chunk({"tool_calls": [head]})
        for part in _chunks(arguments(call)):
            yield chunk({"tool_calls": [{"index": i, "function": {"arguments": part}}]})
    yield chunk({}, "tool_calls" if d.calls else "stop")
    if include_usage:
        yield None, {**base, "choices": [], "usage": _chat_usage(reply)}
    yield None, "[DONE]"


# --- OpenAI Responses --------------------------------------------------------------


def _responses_items(reply: Reply, done: bool = True) -> list[dict[str, Any]]:
    status = "completed" if done else "in_progress"
    items: list[dict[str, Any]] = [
        {
            "type": "function_call",
            "id": f"fc_{cid}",
            "call_id": cid,
            "name": c.name,
            "arguments": arguments(c),
            "status": status,
        }
        for cid, c in zip(reply.call_ids, reply.decision.calls, strict=True)
    ]
    if reply.decision.answer is not None:
        content = [{"type": "output_text", "text": reply.decision.answer, "annotations": [], "logprobs": []}]
        items.append(
            {"type": "message", "id": f"msg_{reply.turn}", "role": "assistant", "status": status, "content": content}
        )
    return items


def responses_response(
    reply: Reply, request: dict[str, Any], done: bool = True, response_id: str | None = None
) -> dict[str, Any]:
    return {
        "id": response_id or _id("resp"),
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed" if done else "in_progress",
        "model": reply.model,
        "output": _responses_items(reply) if done else [],
        "usage": {
            "input_tokens": reply.input_tokens,
            "output_tokens": reply.output_tokens,
            "total_tokens": reply.input_tokens + reply.output_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        }
        if done
        else None,
        "parallel_tool_calls": request.get("parallel_tool_calls", True),
        "tool_choice": request.get("tool_choice", "auto"),
        "tools": request.get("tools") or [],
        "instructions": request.get("instructions"),
        "metadata": request.get("metadata") or {},
        "temperature": request.get("temperature", 1.0),
        "top_p": request.get("top_p", 1.0),
        "text": {"format": {"type": "text"}},
        "error": None,
        "incomplete_details": None,
    }


def responses_events(reply: Reply, request: dict[str, Any]) -> Iterator[Event]:
    rid, seq = _id("resp"), iter(range(1_000_000))

    def event(kind: str, **payload: Any) -> Event:
        return kind, {"type": kind, "sequence_number": next(seq), **payload}

    yield event("response.created", response=responses_response(reply, request, done=False, response_id=rid))
    yield event("response.in_progress", response=responses_response(reply, request, done=False, response_id=rid))
    for index, (pending, item) in enumerate(
        zip(_responses_items(reply, done=False), _responses_items(reply), strict=True)
    ):
        if item["type"] == "function_call":
            yield event("response.output_item.added", output_index=index, item={**pending, "arguments": ""})
            yield event(
                "response.function_call_arguments.delta",
                item_id=item["id"],
                output_index=index,
                delta=item["arguments"],
            )
            yield event(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=index,
                name=item["name"],
                arguments=item["arguments"],
            )
        else:
            text = item["content"][0]["text"]
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            where = {"item_id": item["id"], "output_index": index, "content_index": 0}
            yield event("response.output_item.added", output_index=index, item={**pending, "content": []})
            yield event("response.content_part.added", **where, part=part)
            for piece in _chunks(text):
                yield event("response.output_text.delta", **where, delta=piece, logprobs=[])
            yield event("response.output_text.done", **where, text=text, logprobs=[])
            yield event("response.content_part.done", **where, part={**part, "text": text})
        yield event("response.output_item.done", output_index=index, item=item)
    yield event("response.completed", response=responses_response(reply, request, response_id=rid))


# --- Anthropic Messages ------------------------------------------------------------


def _message_blocks(reply: Reply) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if reply.decision.answer is not None:
        blocks.append({"type": "text", "text": reply.decision.answer})
    blocks += [
        {"type": "tool_use", "id": f"toolu_{cid}", "name": c.name, "input": c.args}
        for cid, c in zip(reply.call_ids, reply.decision.calls, strict=True)
    ]
    return blocks


def messages_response(reply: Reply, message_id: str | None = None) -> dict[str, Any]:
    return {
        "id": message_id or _id("msg"),
        "type": "message",
        "role": "assistant",
        "model": reply.model,
        "content": _message_blocks(reply),
        "stop_reason": "tool_use" if reply.decision.calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens},
    }


def messages_events(reply: Reply) -> Iterator[Event]:
    whole = messages_response(reply)
    start = {
        **whole,
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": reply.input_tokens, "output_tokens": 1},
    }
    yield "message_start", {"type": "message_start", "message": start}
    for index, block in enumerate(whole["content"]):
        empty = {**block, "text": ""} if block["type"] == "text" else {**block, "input": {}}
        yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": empty}
        if block["type"] == "text":
            deltas = [{"type": "text_delta", "text": part} for part in _chunks(block["text"])]
        else:
            deltas = [
                {"type": "input_json_delta", "partial_json": part} for part in _chunks(json.dumps(block["input"]))
            ]
        for delta in deltas:
            yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    delta = {"stop_reason": whole["stop_reason"], "stop_sequence": None}
    yield "message_delta", {"type": "message_delta", "delta": delta, "usage": {"output_tokens": reply.output_tokens}}
    yield "message_stop", {"type": "message_stop"}


# --- Gemini generateContent --------------------------------------------------------


def gemini_args(call: Call) -> dict[str, Any]:
    """The call's arguments as Gemini's `args`, which is always a JSON object: botched JSON text (a sloppy model's)
    cannot be written there, and goes as no arguments, which the Guard refuses as it refuses a missing one."""
    if isinstance(call.args, dict):
        return call.args
    try:
        decoded = json.loads(call.args)
    except (ValueError, RecursionError):
        return {}
    return decoded if isinstance(decoded, dict) else {}


def _gemini_usage(reply: Reply) -> dict[str, int]:
    return {
        "promptTokenCount": reply.input_tokens,
        "candidatesTokenCount": reply.output_tokens,
        "totalTokenCount": reply.input_tokens + reply.output_tokens,
    }


def _gemini_chunk(reply: Reply, parts: list[dict[str, Any]], finish: bool, response_id: str) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    chunk: dict[str, Any] = {"candidates": [candidate], "modelVersion": reply.model, "responseId": response_id}
    if finish:
        # Gemini ends a turn with STOP whether it asks for tools or answers.
        candidate["finishReason"] = "STOP"
        chunk["usageMetadata"] = _gemini_usage(reply)
    else:
        chunk["usageMetadata"] = {"promptTokenCount": reply.input_tokens, "totalTokenCount": reply.input_tokens}
    return chunk


def _gemini_calls(reply: Reply) -> list[dict[str, Any]]:
    return [
        {"functionCall": {"id": cid, "name": c.name, "args": gemini_args(c)}}
        for cid, c in zip(reply.call_ids, reply.decision.calls, strict=True)
    ]


def gemini_response(reply: Reply) -> dict[str, Any]:
    parts = ([{"text": reply.decision.answer}] if reply.decision.answer is not None else []) + _gemini_calls(reply)
    return _gemini_chunk(reply, parts, True, _id("resp"))


def gemini_chunks(reply: Reply) -> list[dict[str, Any]]:
    """A streamed reply: the text in pieces, then each function call whole (Gemini streams no partial arguments
    unless asked to), the last chunk with the finish reason and the whole usage."""
    rid = _id("resp")
    pieces = [[{"text": piece}] for piece in _chunks(reply.decision.answer)] if reply.decision.answer else []
    pieces += [[call] for call in _gemini_calls(reply)]
    pieces = pieces or [[{"text": ""}]]
    return [_gemini_chunk(reply, parts, i == len(pieces) - 1, rid) for i, parts in enumerate(pieces)]


def gemini_events(reply: Reply) -> Iterator[Event]:
    """`gemini_chunks` as server-sent events (`?alt=sse`): unnamed, one chunk each."""
    for chunk in gemini_chunks(reply):
        yield None, chunk
