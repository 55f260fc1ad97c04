"""What the tool boundary emits: one record per tool call, and a stop signal.

The Guard never decides how a run ends; it raises a `StopSignal` record and
the adapters' shared code maps it onto a `StopReason`.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, Field

__all__ = ["ToolCallRecord", "clean", "preview", "shorten"]

#: ok: the tool ran; error: it ran and failed, or its input was invalid;
#: refused: the allowlist or path confinement said no; rejected: an effect
#: tool was not approved; repetition / timeout: the call ended the run; skipped: no model call was left
#: to read its result, so it did not run (and is not kept among the run's records).
Outcome = Literal["ok", "error", "refused", "rejected", "repetition", "timeout", "skipped", "cancelled"]

PREVIEW_CHARS = 300
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_PARTIAL_WORD = re.compile(r"(?<=\s)\S+$")


class ToolCallRecord(BaseModel):
    """One tool call as it passed the Guard."""

    name: str
    args: Any
    call_id: str | None = None
    outcome: Outcome
    is_error: bool
    result: str = Field(exclude=True, repr=False)
    result_preview: str
    result_chars: int
    started_at: float = Field(description="Seconds on the run's clock when the call reached the Guard.")
    duration_s: float

    @property
    def first_arg(self) -> str:
        """The call's first argument as text (the path, query or target it was about)."""
        if isinstance(self.args, dict) and self.args:
            return str(next(iter(self.args.values())))
        return self.args if isinstance(self.args, str) else json.dumps(self.args)


class StopSignal(BaseModel):
    """The Guard's request that the run end, and why."""

    reason: Literal["repetition", "timeout", "rejected", "max_steps", "cancelled"]
    detail: str


def preview(text: str, limit: int = PREVIEW_CHARS) -> str:
    """The head of a tool result, for traces and tables."""
    return text if len(text) <= limit else text[:limit] + f"… [{len(text) - limit} more chars]"


def shorten(text: str, limit: int) -> str:
    """`text` in at most `limit` characters, cut after its last whole word that fits and ending "…" when cut.

    A word is cut only when the first word alone is longer than `limit` (there is no earlier place to cut).
    """
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    if not text[limit - 1].isspace():  # the head ends inside a word: drop that word's start
        head = _PARTIAL_WORD.sub("", head) or head
    return head.rstrip() + "…"


def clean(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD, so it encodes as UTF-8 (JSON, HTTP, files).

    A model or a file name can carry one (`"\\udcff"` is valid JSON); left in, it breaks the next model
    request and every record written after it.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _LONE_SURROGATE.sub("\ufffd", text)
    return text
