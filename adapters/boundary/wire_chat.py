"""The reader of OpenAI Chat Completions replies (a whole body, or each chunk of a stream)."""

from __future__ import annotations

from typing import Any

from looplab.adapters.boundary.wire_reply import ExchangeInfo, count, usage_of


def read(event: dict[str, Any], info: ExchangeInfo) -> None:
    """Add what one reply or chunk says to `info`."""
    if usage := usage_of(info, event, "usage"):
        info.input_tokens = count(info, usage, "prompt_tokens")
        info.output_tokens = count(info, usage, "completion_tokens")
        info.cached_input_tokens = count(info, usage_of(info, usage, "prompt_tokens_details"), "cached_tokens")
    for choice in event.get("choices") or []:
        message = choice.get("message") or choice.get("delta") or {}
        if isinstance(content := message.get("content"), str):
            info.text += content
        for call in message.get("tool_calls") or []:
            if name := (call.get("function") or {}).get("name"):
                info.tool_calls_requested.append(name)
        info.finish_reason = choice.get("finish_reason") or info.finish_reason
