"""The reader of Gemini `generateContent` replies (a whole reply, or each chunk of `streamGenerateContent`)."""

from __future__ import annotations

from typing import Any

from looplab.adapters.boundary.wire_reply import ExchangeInfo, count, usage_of


def read(event: dict[str, Any], info: ExchangeInfo) -> None:
    """One `GenerateContentResponse` (a whole reply or one streamed chunk: each chunk's usage is the reply's so far)."""
    if usage := usage_of(info, event, "usageMetadata"):
        # promptTokenCount includes the cached tokens; thoughts are billed as output, beside the candidates.
        info.input_tokens = count(info, usage, "promptTokenCount") + count(info, usage, "toolUsePromptTokenCount")
        info.output_tokens = count(info, usage, "candidatesTokenCount") + count(info, usage, "thoughtsTokenCount")
        info.cached_input_tokens = count(info, usage, "cachedContentTokenCount")
    candidates = event.get("candidates")
    for candidate in candidates[:1] if isinstance(candidates, list) else []:  # looplab asks for one candidate
        if not isinstance(candidate, dict):
            continue
        content = candidate.get("content")
        parts = content.get("parts") if isinstance(content, dict) else None
        for part in parts if isinstance(parts, list) else []:
            if not isinstance(part, dict):
                continue
            call = part.get("functionCall")
            if isinstance(call, dict) and isinstance(call.get("name"), str):
                info.tool_calls_requested.append(call["name"])
            elif isinstance(text := part.get("text"), str) and not part.get("thought"):
                info.text += text
        if isinstance(reason := candidate.get("finishReason"), str):
            info.finish_reason = reason
