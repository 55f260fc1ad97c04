"""Which model a run talks to, through which provider, wire API and endpoint."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from looplab.adapters.contract.errors import LooplabError
from looplab.adapters.contract.pricing import Pricing

__all__ = [
    "Api",
    "DEFAULT_RETRIES",
    "MESSAGES_MAX_TOKENS",
    "ModelServerUrls",
    "ModelSpec",
    "PROVIDER_ENV",
    "PROVIDER_OF_API",
    "ToolTransport",
    "check_api",
    "parse_model",
]

Api = Literal["chat", "responses", "messages"]
#: How a runner reaches the Guard: calling it in this process, or as an MCP client of a tool server.
ToolTransport = Literal["in-process", "mcp"]

#: Retries of a failed model request, with the SDK's own backoff (and its reading of retry-after).
DEFAULT_RETRIES = 2
#: The reply length every runner asks for on Anthropic Messages, which requires one (a framework's own default
#: would make one runner's replies shorter than another's).
MESSAGES_MAX_TOKENS = 4096
PROVIDER_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
#: Whose wire format each API is.
PROVIDER_OF_API: dict[str, str] = {"messages": "anthropic", "chat": "openai", "responses": "openai"}


def check_api(api: str | None, provider: str) -> None:
    """Refuse, in one line, an API that belongs to the other provider than the model's."""
    if api is None or PROVIDER_OF_API[api] == provider:
        return
    if provider == "openai":
        why = "Anthropic's: use an anthropic: model, or --api chat or responses with openai models"
    else:
        why = "OpenAI's: use an openai: model, or --api messages with anthropic models"
    raise LooplabError(f"the {api} API is {why}")


@dataclass(frozen=True)
class ModelSpec:
    """Which model, through which provider and endpoint.

    `provider` is `openai` or `anthropic`; `base_url` points it at a
    compatible server (the scripted model, vLLM, ...); `api` picks the wire
    format where a runner can speak several; `retries` is how often the
    provider SDK retries a failed request (a 5xx, a 429, a broken
    connection), the same for every runner, since looplab builds every client.
    `pricing` None means the model has no known price: its cost is unknown.
    `headers` are extra headers sent with every model request, by every runner
    (the recorder adds them in-process and at the proxy): a provider's or a
    gateway's options (an API version, a beta flag, an organization or project,
    a routing or attribution header), or the scripted model's persona.
    """

    provider: Literal["openai", "anthropic"]
    name: str
    base_url: str | None = None
    api_key: str | None = None
    api: Api | None = None
    pricing: Pricing | None = None
    retries: int = DEFAULT_RETRIES
    headers: Mapping[str, str] = field(default_factory=dict, hash=False)  # out of the hash: a dict has none

    @property
    def label(self) -> str:
        return f"{self.provider}:{self.name}"

    def key(self) -> str:
        """The API key: given, or from the provider's usual variable; a local base URL needs none."""
        key = self.api_key or os.environ.get(PROVIDER_ENV[self.provider])
        if key:
            return key
        if self.base_url:
            return "not-needed"
        raise LooplabError(
            f"{PROVIDER_ENV[self.provider]} is not set; export it, or pass --base-url for a local server"
        )


def parse_model(text: str) -> tuple[str, str]:
    """Split 'provider:name' (e.g. 'openai:gpt-4.1'), checking the provider."""
    provider, sep, name = text.partition(":")
    if not sep or provider not in PROVIDER_ENV or not name:
        raise LooplabError(f"model {text!r}: spell it provider:name with provider one of {', '.join(PROVIDER_ENV)}")
    return provider, name


class ModelServerUrls:
    """The base URLs the two SDK families take for a model server at `url`: OpenAI's under `/v1`, Anthropic's at it."""

    @property
    def url(self) -> str:
        raise NotImplementedError

    @property
    def openai_base_url(self) -> str:
        return f"{self.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.url
