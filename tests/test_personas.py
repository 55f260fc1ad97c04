"""A case's persona reaches the scripted model with every request, whatever way the runner reaches the model,
and the model it names stays `scripted`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from looplab.adapters import registry
from looplab.run.harness import Endpoint, ModelChoice, run_one
from looplab.scenarios.cases import load_cases
from looplab.scenarios.scripted.conversation import PERSONA_HEADER
from looplab.scenarios.scripted.server import ScriptedModelServer
from tests.tiers import by_tier

CASES = load_cases()
#: One runner on the in-process recording transport; one that reaches the model through the loopback proxy (the
#: OpenAI Agents SDK speaks Anthropic Messages through LiteLLM, which builds its own client).
RUNNERS = {"handrolled": ("in-process transport", None), "openai_agents": ("loopback proxy", "messages")}


@dataclass
class _Seen:
    """Remembers, for each model request that reaches the server, its persona header and the model it names."""

    app: ASGIApp
    requests: list[tuple[str | None, str]] = field(default_factory=list)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        body: list[bytes] = []

        async def keep() -> Message:
            message = await receive()
            body.append(message.get("body", b""))
            if not message.get("more_body"):
                self.requests.append((headers.get(PERSONA_HEADER), json.loads(b"".join(body)).get("model")))
            return message

        await self.app(scope, keep, send)


@pytest.mark.parametrize("runner", by_tier(pytest.param(runner, id=how) for runner, (how, _) in RUNNERS.items()))
@pytest.mark.parametrize(("case_id", "stop"), [("injected-instruction", "rejected"), ("sloppy-calls", None)])
def test_a_cases_persona_reaches_the_model_with_every_request(runner: str, case_id: str, stop: str | None) -> None:
    """A gullible model asks to write (the gate rejects it), a sloppy one botches calls: the case's checks hold only
    if the model played the persona; every request carried it, and named the model `scripted`."""
    if not registry.RUNNERS[runner].installed():
        pytest.skip(f"{runner} is not installed here")
    case = CASES[case_id]
    wrapped: list[_Seen] = []
    with ScriptedModelServer(wrap=lambda app: wrapped.append(_Seen(app)) or wrapped[0]) as server:
        urls = {"openai": server.openai_base_url, "anthropic": server.anthropic_base_url}
        outcome = run_one(runner, case, Endpoint(ModelChoice(api=RUNNERS[runner][1]), urls))
    assert outcome.result is not None, outcome.error
    assert outcome.passed, [f"{c.name}: {c.detail}" for c in outcome.checks if not c.passed]
    if stop:
        assert outcome.result.stop_reason == stop
    assert outcome.result.model.split(":", 1)[1] == "scripted"
    requests = wrapped[0].requests
    assert requests and set(requests) == {(case.model.persona, "scripted")}
