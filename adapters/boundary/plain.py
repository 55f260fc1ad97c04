"""Plain SDK clients for a runner's bare loop: what a run's session builds, minus the recording transport."""

from __future__ import annotations

from typing import Any

from looplab.adapters.boundary.transport import http_module_for

__all__ = ["plain_http_client", "plain_openai_client"]


def plain_http_client(sdk: Any, base_url: str, *, is_async: bool = False) -> Any:
    """The HTTP client a bare loop gives its SDK: what a run's session builds, minus the recording transport.

    Same module (httpx2 or httpx, as the SDK uses), same TLS choice (none for a plain-http endpoint), so
    the harness tax compares the boundaries and not two ways of setting up a client.
    """
    http = http_module_for(sdk)
    verify = {"verify": False} if base_url.startswith("http://") else {}
    return http.AsyncClient(**verify) if is_async else http.Client(**verify)


def plain_openai_client(base_url: str, *, is_async: bool = True) -> Any:
    """An `openai` client for a bare loop, on `plain_http_client` (closing the client closes that too)."""
    import openai

    http = plain_http_client(openai, base_url, is_async=is_async)
    cls = openai.AsyncOpenAI if is_async else openai.OpenAI
    return cls(api_key="not-needed", base_url=base_url, http_client=http)
