"""The reader of Anthropic Messages replies (a whole message, or each event of a stream)."""

from __future__ import annotations

from typing import Any

from looplab.adapters.boundary.wire_reply import ExchangeInfo, count, usage_of


def read(event: dict[str, Any], info: ExchangeInfo) -> None:
    """Add what one reply or event says to `info`."""
    kind = event.get("type")
    message = event.get("message") if kind == "message_start" else event if kind == "message" else None
    if message:
        usage = usage_of(info, message, "usage")
        # Anthropic's input_tokens leaves out the cached ones; looplab's input counts every input token.
        info.cached_input_tokens = count(info, usage, "cache_read_input_tokens")
        info.cache_write_tokens = count(info, usage, "cache_creation_input_tokens")
        info.input_tokens = count(info, usage, "input_tokens") + info.cached_input_tokens + info.cache_write_tokens
        info.output_tokens = count(info, usage, "output_tokens")
        info.finish_reason = message.get("stop_reason")
        for block in message.get("content") or []:
            if block.get("type") == "tool_use":
                info.tool_calls_requested.append(block.get("name"))
            elif block.get("type") == "text" and isinstance(block.get("text"), str):
                info.text += block["text"]
    elif kind == "content_block_start" and (event.get("content_block") or {}).get("type") == "tool_use":
        info.tool_calls_requested.append(event["content_block"].get("name"))
    elif kind == "content_block_delta" and isinstance(text := (event.get("delta") or {}).get("text"), str):
        info.text += text
    elif kind == "message_delta":
        info.finish_reason = (event.get("delta") or {}).get("stop_reason") or info.finish_reason
        info.output_tokens = count(info, usage_of(info, event, "usage"), "output_tokens") or info.output_tokens
