"""A case's persona reaches the scripted model with every request, whatever way the runner reaches the model,
and the model it names stays `scripted`."""

from __future__ import annotations

import pytest

from looplab.adapters import registry
from looplab.run.harness import Endpoint, ModelChoice, run_one
from looplab.scenarios.cases import load_cases
from looplab.scenarios.scripted.conversation import PERSONA_HEADER
from looplab.scenarios.scripted.requests import RequestLog
from looplab.scenarios.scripted.server import ScriptedModelServer
from tests.tiers import by_tier

CASES = load_cases()
#: One runner on the in-process recording transport; one that reaches the model through the loopback proxy (the
#: OpenAI Agents SDK speaks Anthropic Messages through LiteLLM, which builds its own client).
RUNNERS = {"handrolled": ("in-process transport", None), "openai_agents": ("loopback proxy", "messages")}


@pytest.mark.parametrize("runner", by_tier(pytest.param(runner, id=how) for runner, (how, _) in RUNNERS.items()))
@pytest.mark.parametrize(("case_id", "stop"), [("injected-instruction", "rejected"), ("sloppy-calls", None)])
def test_a_cases_persona_reaches_the_model_with_every_request(runner: str, case_id: str, stop: str | None) -> None:
    """A gullible model asks to write (the gate rejects it), a sloppy one botches calls: the case's checks hold only
    if the model played the persona; every request carried it, and named the model `scripted`."""
    if not registry.RUNNERS[runner].installed():
        pytest.skip(f"{runner} is not installed here")
    case = CASES[case_id]
    log = RequestLog()
    with ScriptedModelServer(wrap=log.wrap) as server:
        urls = {"openai": server.openai_base_url, "anthropic": server.anthropic_base_url}
        outcome = run_one(runner, case, Endpoint(ModelChoice(api=RUNNERS[runner][1]), urls))
    assert outcome.result is not None, outcome.error
    assert outcome.passed, [f"{c.name}: {c.detail}" for c in outcome.checks if not c.passed]
    if stop:
        assert outcome.result.stop_reason == stop
    assert outcome.result.model.split(":", 1)[1] == "scripted"
    # every model request carried the persona header and named the model `scripted`
    requests = [(r.headers.get(PERSONA_HEADER), r.json().get("model")) for r in log.posts()]
    assert requests and set(requests) == {(case.model.persona, "scripted")}
