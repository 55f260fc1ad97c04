"""The tools as a runner sees them, whichever way it reaches the Guard."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

__all__ = ["ToolBoundary"]


class ToolReply(Protocol):
    """What a tool call hands back to the runner: the text the model reads, and whether it is an error."""

    result: str
    is_error: bool


class ToolBoundary(Protocol):
    """The tools as an adapter sees them: the Guard itself, or an MCP client of it (`boundary/mcp_tools.py`)."""

    @property
    def tools(self) -> Sequence[Any]:
        """Each tool's `name`, `description` and `parameters` (its JSON schema)."""

    def call(self, name: str, args: Any, call_id: str | None = None) -> ToolReply:
        """Run one tool call; never raises for what the call held or did."""
