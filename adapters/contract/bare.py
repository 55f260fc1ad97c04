"""What a runner's bare loop shares: the same framework loop with none of looplab's boundaries.

Every adapter module defines, beside its runner, `bare_run(task, tools, urls, model, max_steps, *,
system_prompt) -> int`: the framework's agent told `system_prompt`, on a plain SDK client
(`plain_http_client`, no recorder), plain tool functions (no Guard), its own cap set to `max_steps`,
speaking the runner's first wire API at `urls` (provider -> base URL, as `ModelServerUrls` gives them);
it returns the model requests it made. `looplab bench` times
it right beside the runner to measure the harness tax. It lives beside the adapter because only an
adapter module imports its framework.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol

__all__ = ["BareRun", "BareTool"]


class BareTool(NamedTuple):
    """A tool as a bare loop has it: name, description, JSON schema, and a function of keyword arguments.

    The function never raises: a failure comes back as an error text, as any loop needs.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    fn: Callable[..., str]


class BareRun(Protocol):
    """The signature of every adapter module's `bare_run`."""

    def __call__(
        self,
        task: str,
        tools: Sequence[BareTool],
        urls: dict[str, str],
        model: str,
        max_steps: int,
        *,
        system_prompt: str,
    ) -> int: ...
