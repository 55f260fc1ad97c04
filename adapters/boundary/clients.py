"""The SDK clients of one run: `openai`, `anthropic` and `google-genai` clients whose every model request passes
the run's recorder, on HTTP clients closed with the run."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from looplab.adapters.boundary.recorder import ModelRecorder
from looplab.adapters.boundary.transport import http_module_for
from looplab.adapters.contract.limits import Limits
from looplab.adapters.contract.model import ModelSpec

__all__ = ["RunClients"]


class RunClients:
    """Makes a run's provider SDK clients for its model, each on a recording HTTP client, and closes them."""

    def __init__(self, recorder: ModelRecorder, model: ModelSpec, limits: Limits) -> None:
        self.recorder, self.model, self.limits = recorder, model, limits
        self._made: list[tuple[Any, bool]] = []  # the HTTP clients made, and whether each is async

    def openai_client(self, *, is_async: bool = True) -> Any:
        """An `openai` client for this run's model, recorded at the model boundary."""
        import openai  # a provider SDK, present whenever a runner that calls this is installed

        cls = openai.AsyncOpenAI if is_async else openai.OpenAI
        http = self.http_client(openai, is_async=is_async)
        return cls(**self._client_options(), http_client=http)

    def anthropic_client(self, *, is_async: bool = True) -> Any:
        """An `anthropic` client for this run's model, recorded at the model boundary."""
        import anthropic

        cls = anthropic.AsyncAnthropic if is_async else anthropic.Anthropic
        http = self.http_client(anthropic, is_async=is_async)
        return cls(**self._client_options(), http_client=http)

    def gemini_client(self, *, is_async: bool = True) -> Any:
        """A `google.genai.Client` for this run's model, its sync (or async) requests recorded at the model boundary.

        The recording HTTP client is the caller's to google-genai: neither closing nor collecting the `Client`
        closes it; the run does, with its other clients.
        """
        from google import genai
        from google.genai import _api_client, types

        # The HTTP client module google-genai itself would build on (httpx unless GOOGLE_GENAI_HTTP_CLIENT says;
        # google-genai 1.x, which CrewAI pins, knows httpx only).
        backend = getattr(_api_client, "_get_http_client_backend", lambda: "httpx")
        http = importlib.import_module(backend())
        recorded = self._recording_client(http, is_async=is_async)
        options = types.HttpOptions(
            base_url=self.model.base_url,
            # google-genai sends its own per-request timeout (None: none at all), so the run's is set here too.
            timeout=int(self.limits.max_seconds * 1000),
            retry_options=types.HttpRetryOptions(attempts=self.model.retries + 1),
            **{"httpx_async_client" if is_async else "httpx_client": recorded},
        )
        # `google:` is Gemini's own API: a caller's GOOGLE_GENAI_USE_VERTEXAI must not turn the paths into Vertex AI's.
        return genai.Client(vertexai=False, api_key=self.model.key(), http_options=options)

    def _client_options(self) -> dict[str, Any]:
        """What every provider SDK client of this run is built with: key, endpoint, and the one retry policy."""
        return {"api_key": self.model.key(), "base_url": self.model.base_url, "max_retries": self.model.retries}

    def http_client(self, sdk: ModuleType, *, is_async: bool = False) -> Any:
        """A recording HTTP client of the kind `sdk` (the `openai` or `anthropic` module) takes.

        Its timeout is the run's whole `max_seconds`, so a model call that hangs cannot outlast the run.
        """
        return self._recording_client(http_module_for(sdk), is_async=is_async)

    def _recording_client(self, http: ModuleType, *, is_async: bool) -> Any:
        """A recording client of the HTTP module `http` (`httpx` or `httpx2`), closed with the run."""
        timeout = http.Timeout(self.limits.max_seconds, connect=min(10.0, self.limits.max_seconds))
        plain = (self.model.base_url or "").startswith("http://")
        client = self.recorder.http_client(http, is_async=is_async, tls=not plain, timeout=timeout)
        self._made.append((client, is_async))
        return client

    async def aclose(self) -> None:
        """Close the run's async HTTP clients: inside the event loop they ran in, before it ends (their connections
        belong to it: closed after it, they leak, one open socket a run)."""
        for client, is_async in self._made:
            if is_async:
                await client.aclose()

    def close(self) -> None:
        """Close the run's sync HTTP clients (async ones are closed by `aclose`, in their loop)."""
        for client, is_async in self._made:
            if not is_async:
                client.close()
