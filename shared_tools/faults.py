"""Faults a case injects into a tool: it answers without content, fails, or is slow.

A fault wraps the tool's function, so the Guard still sees and records every
call; what changes is what the tool returns, as a broken tool would.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from looplab.shared_tools.guard import Tool


class Fault(BaseModel):
    """`silent`: return `text` instead of the output; `error`: raise with `text`; `slow`: wait `seconds` first."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: str
    kind: Literal["silent", "error", "slow"]
    text: str = "ok"
    seconds: float = 0.0

    def apply(self, tool: Tool) -> Tool:
        """`tool` with this fault in its function."""
        inner = tool.fn

        @functools.wraps(inner)  # keeps the signature the Guard inspects (e.g. run_tests' timeout_s)
        def faulty(ws: Any, *args: Any, **kwargs: Any) -> str:
            if self.kind == "silent":
                return self.text
            if self.kind == "error":
                raise RuntimeError(self.text)
            time.sleep(self.seconds)
            return inner(ws, *args, **kwargs)

        # A slow fault sleeps before the tool sees its `timeout_s`: the Guard must bound it, not trust it to stop.
        return dataclasses.replace(tool, fn=faulty, honours_timeout=tool.honours_timeout and self.kind != "slow")


def with_faults(tools: Iterable[Tool], faults: Iterable[Fault]) -> list[Tool]:
    """The tools with each fault applied to the tool it names."""
    by_tool: dict[str, list[Fault]] = {}
    for fault in faults:
        by_tool.setdefault(fault.tool, []).append(fault)
    out = []
    for tool in tools:
        for fault in by_tool.get(tool.name, []):
            tool = fault.apply(tool)
        out.append(tool)
    return out
