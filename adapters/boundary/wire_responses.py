"""The reader of OpenAI Responses replies (a whole response, or the closing event of a stream)."""

from __future__ import annotations

from typing import Any

from looplab.adapters.boundary.wire_reply import ExchangeInfo, count, usage_of


def read(event: dict[str, Any], info: ExchangeInfo) -> None:
    """Add what one reply or event says to `info`."""
    if event.get("object") == "response":
        response = event
    elif event.get("type") in ("response.completed", "response.incomplete", "response.failed"):
        response = event.get("response") or {}
    else:  # streamed deltas: the closing event repeats everything
        return
    usage = usage_of(info, response, "usage")
    info.input_tokens = count(info, usage, "input_tokens")
    info.output_tokens = count(info, usage, "output_tokens")
    info.cached_input_tokens = count(info, usage_of(info, usage, "input_tokens_details"), "cached_tokens")
    calls = [item.get("name") for item in response.get("output") or [] if item.get("type") == "function_call"]
    info.tool_calls_requested = calls
    info.finish_reason = "tool_calls" if calls else response.get("status")
