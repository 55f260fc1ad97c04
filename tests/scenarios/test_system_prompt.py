"""The system prompt is the case's: its own if it sets one, else its suite's `system_prompt.txt`, else looplab's
default; and it is what every runner sends the model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from looplab.adapters.contract.errors import LooplabError
from looplab.adapters.contract.limits import Limits
from looplab.run.harness import Endpoint, ModelChoice, run_one
from looplab.scenarios.cases import default_system_prompt, load_case, load_cases
from looplab.scenarios.scripted.requests import RequestLog
from looplab.scenarios.scripted.server import ScriptedModelServer
from looplab.scenarios.suite import DEFAULT_SYSTEM_PROMPT_PATH
from tests.conftest import FIXTURE_REPO, TASK
from tests.runs import ALL_RUNNERS, run_runner
from tests.tiers import by_tier

#: A prompt no framework would write on its own, in characters every wire format sends as they are.
OWN_PROMPT = "You are case-own-prompt-7f3a: investigate the failing test and name the cause."


def _case_file(folder: Path, system_prompt: str | None) -> Path:
    """vip-compound's case as a file of a suite in `folder` (its repo given by absolute path), with `system_prompt`."""
    case = load_cases()["vip-compound"]
    lines = [f"id = {json.dumps(case.id)}", f"repo = {json.dumps(str(FIXTURE_REPO))}"]
    lines += [f"target = {json.dumps(case.target)}", f"task = {json.dumps(TASK, ensure_ascii=False)}"]
    if system_prompt is not None:  # JSON's escapes are TOML's; DEL, which JSON leaves as it is, TOML refuses
        lines.append(f"system_prompt = {json.dumps(system_prompt, ensure_ascii=False)}")
    path = folder / "suite" / "cases" / "own.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("api", ["messages", "chat"])
def test_a_cases_own_system_prompt_is_what_the_model_is_sent(api: str, tmp_path: Path) -> None:
    case = load_case(_case_file(tmp_path, OWN_PROMPT))
    seen = RequestLog()
    with ScriptedModelServer(wrap=seen.wrap) as server:
        urls = {"openai": server.openai_base_url, "anthropic": server.anthropic_base_url}
        outcome = run_one("handrolled", case, Endpoint(ModelChoice(api=api), urls))  # type: ignore[arg-type]
    assert outcome.result is not None and outcome.result.stop_reason == "final_answer", outcome.error
    requests = seen.bodies()
    assert len(requests) == outcome.result.totals.model_calls
    if api == "messages":
        assert [r["system"] for r in requests] == [OWN_PROMPT] * len(requests)
    else:
        assert all(r["messages"][0] == {"role": "system", "content": OWN_PROMPT} for r in requests)


@pytest.mark.parametrize("runner", by_tier(ALL_RUNNERS))
def test_every_runner_sends_the_system_prompt_it_is_given(runner: str) -> None:
    seen = RequestLog()
    with ScriptedModelServer(wrap=seen.wrap) as server:
        result = run_runner(runner, server, Limits(max_steps=2), system_prompt=OWN_PROMPT)
    assert result.totals.model_calls >= 1, result.stop_detail
    assert seen.posts() and all(OWN_PROMPT.encode() in r.body for r in seen.posts())


@settings(deadline=None)
@given(prompt=st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x7f"), max_size=200))
def test_a_case_that_sets_a_system_prompt_keeps_its_own(prompt: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    folder = tmp_path_factory.mktemp("case")
    (folder / "suite").mkdir()
    (folder / "suite" / "system_prompt.txt").write_text("the suite's prompt\n", encoding="utf-8")
    assert load_case(_case_file(folder, prompt)).system_prompt == prompt


def test_a_case_without_one_takes_its_suites_file(tmp_path: Path) -> None:
    shipped = DEFAULT_SYSTEM_PROMPT_PATH.read_text(encoding="utf-8")
    assert default_system_prompt() == shipped.rstrip("\n") and "Never invent results" in shipped
    assert {case.system_prompt for case in load_cases().values()} == {default_system_prompt()}
    path = _case_file(tmp_path, None)
    (path.parent.parent / "system_prompt.txt").write_text("Investigate, briefly.\n", encoding="utf-8")
    assert load_case(path).system_prompt == "Investigate, briefly."


def test_a_case_without_one_in_a_suite_without_the_file_takes_looplabs_default(tmp_path: Path) -> None:
    assert load_case(_case_file(tmp_path, None)).system_prompt == default_system_prompt()


def test_a_suite_prompt_that_cannot_be_read_is_a_one_line_error(tmp_path: Path) -> None:
    path = _case_file(tmp_path, None)
    (path.parent.parent / "system_prompt.txt").write_bytes(b"\xff\xfe not text")
    with pytest.raises(LooplabError) as info:
        load_case(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message
    assert str(path.parent.parent.resolve() / "system_prompt.txt") in message
