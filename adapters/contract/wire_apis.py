"""The wire-API table: each model API looplab speaks, its request paths and how a recorded call names it.

Every room that routes, records, fakes or checks a model request reads its paths from here (the recorder, the
proxy, the scripted model server and its faults, the conformance checks), so a path is written once. The
recorder finds the reader of an API's replies through it too: the boundary's module named after the API
(`boundary/wire_chat.py`, ..., `boundary/wire_gemini.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from looplab.adapters.contract.model import Api

__all__ = ["API_OF_ENDPOINT", "ENDPOINT_OF_API", "ENDPOINT_OF_SUFFIX", "GEMINI", "MODEL_PATHS", "WIRE_API", "WIRE_APIS"]


@dataclass(frozen=True)
class WireApi:
    """One wire API: its `--api` name, the endpoint name its recorded calls carry, and its request paths.

    Three APIs have one fixed path after the base URL (`path`); Gemini's path names the model instead
    (`models/NAME:METHOD`), so it is known by its `methods`, each with whether it streams.
    """

    name: Api
    #: How a recorded model call names it (`ModelCall.endpoint`): Gemini's two methods are one endpoint.
    endpoint: str
    #: The request path after the base URL (`responses`); None when the path names the model (Gemini).
    path: str | None = None
    #: The methods after the model in the URL, and whether each streams (Gemini only).
    methods: Mapping[str, bool] = field(default_factory=dict)

    @property
    def suffixes(self) -> tuple[str, ...]:
        """How a request URL's path ends for this API (`/messages`, `:generateContent`)."""
        return (f"/{self.path}",) if self.path else tuple(f":{method}" for method in self.methods)


#: Gemini's API: `models/NAME:generateContent`, or `:streamGenerateContent`, which streams.
GEMINI = WireApi("gemini", "generateContent", methods={"generateContent": False, "streamGenerateContent": True})
#: Every wire API, in `--api`'s order.
WIRE_APIS: tuple[WireApi, ...] = (
    WireApi("chat", "chat.completions", path="chat/completions"),
    WireApi("responses", "responses", path="responses"),
    WireApi("messages", "messages", path="messages"),
    GEMINI,
)

#: Each wire API by its `--api` name.
WIRE_API: dict[str, WireApi] = {api.name: api for api in WIRE_APIS}
#: The wire API (as `--api` names it) each recorded endpoint belongs to.
API_OF_ENDPOINT: dict[str, str] = {api.endpoint: api.name for api in WIRE_APIS}
#: The endpoint each wire API's recorded calls carry.
ENDPOINT_OF_API: dict[str, str] = {api.name: api.endpoint for api in WIRE_APIS}
#: The recorded endpoint by URL path suffix, for every wire API's paths.
ENDPOINT_OF_SUFFIX: dict[str, str] = {suffix: api.endpoint for api in WIRE_APIS for suffix in api.suffixes}
#: How any model request's URL path ends (for `str.endswith`).
MODEL_PATHS: tuple[str, ...] = tuple(ENDPOINT_OF_SUFFIX)
