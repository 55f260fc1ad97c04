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


def plain_http_client(sdk: Any, base_url: str, *, is_async: bool = False) -> Any:
    """The HTTP client a bare loop gives its SDK: what a run's session builds, minus the recording transport.

    Same module (httpx2 or httpx, as the SDK uses), same TLS choice (none for a plain-http endpoint), so
    the harness tax compares the boundaries and not two ways of setting up a client.
    """
    from adapters.recorder import http_module_for

    http = http_module_for(sdk)
    verify = {"verify": False} if base_url.startswith("http://") else {}
    return http.AsyncClient(**verify) if is_async else http.Client(**verify)


def plain_openai_client(base_url: str, *, is_async: bool = True) -> Any:
    """An `openai` client for a bare loop, on `plain_http_client` (closing the client closes that too)."""
    import openai

    http = plain_http_client(openai, base_url, is_async=is_async)
    cls = openai.AsyncOpenAI if is_async else openai.OpenAI
    return cls(api_key="not-needed", base_url=base_url, http_client=http)
