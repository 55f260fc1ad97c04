"""A model's reply read for the record: tokens, finish reason and requested tools, by its wire API's reader.

Each wire API's reader is the module of this room named after it as the wire-API table names the API
(`adapters/contract/wire_apis.py`): `wire_chat`, `wire_responses`, `wire_messages`, `wire_gemini`; what they share
is `wire_reply`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import cache
from typing import Any

from looplab.adapters.boundary.wire_reply import SSE_START, ExchangeInfo, read_json, sse_events
from looplab.adapters.contract.wire_apis import API_OF_ENDPOINT, GEMINI

#: Where the readers live (this module's room).
_ROOM = __name__.rpartition(".")[0]
#: A wire API's reader: what one reply (or one event of a streamed one) says, added to an `ExchangeInfo`.
Reader = Callable[[dict[str, Any], ExchangeInfo], None]


@cache
def reader_of(endpoint: str) -> Reader:
    """The reader of `endpoint`'s replies: `read` in `wire_NAME`, NAME being the endpoint's API as the wire-API
    table names it (`chat`, `responses`, `messages`, `gemini`)."""
    return importlib.import_module(f"{_ROOM}.wire_{API_OF_ENDPOINT[endpoint]}").read


def parse_exchange(
    endpoint: str, response_body: bytes, tools_named_in_text: Callable[[str], list[str]] | None = None
) -> ExchangeInfo:
    """Tokens, finish reason and requested tools from a response, streamed (SSE) or not.

    `tools_named_in_text` reads the tools a reply's text names, for a runner whose loop takes its tool calls
    from text: applied only to a reply that requests no tool natively.
    """
    # Told from the reply's first bytes, which say what came on the wire: reading the request's "stream" flag
    # means scanning (or parsing) the whole conversation so far, which costs more than the rest of the record.
    info = ExchangeInfo(streamed=SSE_START.match(response_body) is not None)
    events = list(sse_events(response_body)) if info.streamed else [read_json(response_body)]
    if endpoint == GEMINI.endpoint and isinstance(events[0], list) and not info.streamed:
        # streamGenerateContent without `alt=sse`: the chunks come as one JSON array.
        events, info.streamed = events[0], True
    reader = reader_of(endpoint)
    for event in events:
        if isinstance(event, dict):
            reader(event, info)
    if tools_named_in_text is not None and not info.tool_calls_requested:
        info.tool_calls_requested = list(tools_named_in_text(info.text))
    return info
