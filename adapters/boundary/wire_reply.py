"""What every wire API's reader (`wire_chat`, ...) shares: what it reads into (`ExchangeInfo`), a reply's JSON and
events, and its token counts, read strictly."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pydantic_core


@dataclass
class ExchangeInfo:
    """What the recorder reads out of one request/response pair."""

    streamed: bool = False
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0
    finish_reason: str | None = None
    tool_calls_requested: list[str] = field(default_factory=list)
    usage_estimated: bool = False
    #: A count in the reply's usage was not a non-negative integer (negative, a float, text): none of it is used.
    usage_unusable: bool = False
    #: The reply's text (Chat Completions, Messages and Gemini): where a text protocol names its tool.
    text: str = ""


#: How a server-sent-events body begins: a field or a comment line (a JSON body begins with "{").
SSE_START = re.compile(rb"\s*(?:event|data|id|retry)?:")

#: The most tokens one reply may report in one count: far past any model's context and output, and far short of
#: what turns a cost into an overflow. A count above it is not a count.
MAX_REPORTED_TOKENS = 10**12


def count(info: ExchangeInfo, usage: Any, key: str) -> int:
    """The token count `usage[key]`: 0 when absent or null; one that is not a non-negative integer up to
    `MAX_REPORTED_TOKENS` (negative, a float, a string, true) counts 0 and marks the reply's usage unusable, so
    the recorder estimates the call's tokens from its bytes as for a reply without usage: no count a reply
    reports can lower what a budget has spent."""
    value = usage.get(key) if isinstance(usage, dict) else None
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_REPORTED_TOKENS:
        return value
    info.usage_unusable = True
    return 0


def usage_of(info: ExchangeInfo, holder: Any, key: str) -> dict[str, Any]:
    """`holder[key]` when it is an object; anything else there (a list, a number) marks the usage unusable."""
    value = holder.get(key) if isinstance(holder, dict) else None
    if value is not None and not isinstance(value, dict):
        info.usage_unusable = True
    return value if isinstance(value, dict) else {}


def read_json(body: bytes) -> Any:
    """`body` as the standard `json` module reads it, or None where it reads nothing.

    pydantic-core's parser goes first: it reads a reply about three times as fast, and where it reads
    anything, it reads what `json` does. It refuses some text `json` takes (an escaped lone surrogate,
    a byte-order mark, nesting past 200 levels); `json` then decides.
    """
    try:
        return pydantic_core.from_json(body)
    except ValueError:
        pass
    try:
        return json.loads(body)
    except ValueError:
        return None


def sse_events(body: bytes) -> Iterator[Any]:
    """The JSON of each `data:` line of a server-sent-events body (None where a line is not JSON)."""
    for line in body.decode("utf-8", errors="replace").splitlines():
        if line.startswith("data:") and (payload := line[5:].strip()) not in ("", "[DONE]"):
            yield read_json(payload.encode())
