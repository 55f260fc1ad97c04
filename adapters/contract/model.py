"""Which model a run talks to, through which provider, wire API and endpoint."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from looplab.adapters.contract.errors import LooplabError
from looplab.adapters.contract.pricing import Pricing

__all__ = [
    "Api",
    "DEFAULT_RETRIES",
    "KEY_VARIABLES",
    "MESSAGES_MAX_TOKENS",
    "ModelServerUrls",
    "ModelSpec",
    "PROVIDER_ENV",
    "PROVIDER_OF_API",
    "ToolTransport",
    "check_api",
    "gemini_error",
    "key_from",
    "missing_key",
    "parse_model",
]

Api = Literal["chat", "responses", "messages", "gemini"]
Provider = Literal["openai", "anthropic", "google"]
#: How a runner reaches the Guard: calling it in this process, or as an MCP client of a tool server.
ToolTransport = Literal["in-process", "mcp"]

#: Retries of a failed model request, with the SDK's own backoff (and its reading of retry-after).
DEFAULT_RETRIES = 2
#: The reply length every runner asks for on Anthropic Messages, which requires one (a framework's own default
#: would make one runner's replies shorter than another's).
MESSAGES_MAX_TOKENS = 4096
#: The variable each provider's key is named by (in messages and docs).
PROVIDER_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "google": "GEMINI_API_KEY"}
#: Where each provider's key is looked for, first set wins: google-genai 2.x takes GOOGLE_API_KEY over
#: GEMINI_API_KEY when both are set, and so does looplab, so that a run and the SDK never use different keys.
KEY_VARIABLES: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "google": ("GOOGLE_API_KEY", "GEMINI_API_KEY"),
}
#: Whose wire format each API is.
PROVIDER_OF_API: dict[str, str] = {"messages": "anthropic", "chat": "openai", "responses": "openai", "gemini": "google"}
_PROVIDER_NAMES = {"openai": "OpenAI", "anthropic": "Anthropic", "google": "Google"}
#: Gemini's error `status` (google.rpc.Code's name) for each HTTP status an error is sent with.
GEMINI_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def gemini_error(status: int, message: str) -> dict[str, Any]:
    """An error body as Gemini's API writes one (google-genai raises it as `ClientError`/`ServerError`)."""
    name = GEMINI_STATUS.get(status) or ("INTERNAL" if status >= 500 else "FAILED_PRECONDITION")
    return {"error": {"code": status, "message": message, "status": name}}


def key_from(provider: str, env: Mapping[str, str]) -> str | None:
    """The provider's key from `env`, from the first of its `KEY_VARIABLES` that is set."""
    return next((env[name] for name in KEY_VARIABLES[provider] if env.get(name)), None)


def missing_key(provider: str) -> str:
    """Says that the provider's key is not set, naming its variable (and the others it is looked for in)."""
    named = PROVIDER_ENV[provider]
    return f"{named} is not set" + "".join(f" (nor {name})" for name in KEY_VARIABLES[provider] if name != named)


def check_api(api: str | None, provider: str) -> None:
    """Refuse, in one line, an API that belongs to another provider than the model's."""
    if api is None or PROVIDER_OF_API[api] == provider:
        return
    owner = PROVIDER_OF_API[api]
    own = [a for a, p in PROVIDER_OF_API.items() if p == provider]
    article = "an" if owner[0] in "aeiou" else "a"
    instead = f"use {article} {owner}: model, or --api {' or '.join(own)} with {provider} models"
    raise LooplabError(f"the {api} API is {_PROVIDER_NAMES[owner]}'s: {instead}")


@dataclass(frozen=True)
class ModelSpec:
    """Which model, through which provider and endpoint.

    `provider` is `openai`, `anthropic` or `google`; `base_url` points it at a
    compatible server (the scripted model, vLLM, ...); `api` picks the wire
    format where a runner can speak several; `retries` is how often the
    provider SDK retries a failed request (a 5xx, a 429, a broken
    connection), the same for every runner, since looplab builds every client.
    `pricing` None means the model has no known price: its cost is unknown.
    `headers` are extra headers sent with every model request, by every runner
    (the recorder adds them in-process and at the proxy): a provider's or a
    gateway's options (an API version, a beta flag, an organization or project,
    a routing or attribution header), or the scripted model's persona.
    `stream` asks for streamed replies (True) or whole ones (False); None leaves
    it to each runner (the first of its `streams`).
    """

    provider: Provider
    name: str
    base_url: str | None = None
    api_key: str | None = None
    api: Api | None = None
    pricing: Pricing | None = None
    retries: int = DEFAULT_RETRIES
    headers: Mapping[str, str] = field(default_factory=dict, hash=False)  # out of the hash: a dict has none
    stream: bool | None = None

    @property
    def label(self) -> str:
        return f"{self.provider}:{self.name}"

    def key(self) -> str:
        """The API key: given, or from the provider's usual variables; a local base URL needs none."""
        key = self.api_key or key_from(self.provider, os.environ)
        if key:
            return key
        if self.base_url:
            return "not-needed"
        raise LooplabError(f"{missing_key(self.provider)}; export it, or pass --base-url for a local server")


def parse_model(text: str) -> tuple[str, str]:
    """Split 'provider:name' (e.g. 'openai:gpt-4.1'), checking the provider."""
    provider, sep, name = text.partition(":")
    if not sep or provider not in PROVIDER_ENV or not name:
        raise LooplabError(f"model {text!r}: spell it provider:name with provider one of {', '.join(PROVIDER_ENV)}")
    return provider, name


class ModelServerUrls:
    """The base URLs the SDK families take for a model server at `url`: OpenAI's under `/v1`, Anthropic's and
    google-genai's at it (google-genai adds its API version, `/v1beta`)."""

    @property
    def url(self) -> str:
        raise NotImplementedError

    @property
    def openai_base_url(self) -> str:
        return f"{self.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.url

    @property
    def gemini_base_url(self) -> str:
        return self.url

    @property
    def base_urls(self) -> dict[str, str]:
        """The base URL for each provider's SDK, by provider."""
        return {"openai": self.openai_base_url, "anthropic": self.anthropic_base_url, "google": self.gemini_base_url}
