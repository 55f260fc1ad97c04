"""What the plan keeps apart: the model boundary reads no runner's text protocol unless the runner supplies the
reader, and no runner carries a scenario's text (tasks, prompts, checks reach a runner through the run)."""

from __future__ import annotations

import contextvars
import json
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from looplab.adapters.boundary.recorder import ModelRecorder
from looplab.adapters.contract.limits import Limits, StopReason
from looplab.adapters.contract.model import ModelSpec
from looplab.adapters.contract.result import Finished, NativeCap
from looplab.adapters.session import Runner, RunSession
from looplab.scenarios.cases import BUILTIN_SUITE
from looplab.scenarios.suite import DEFAULT_SYSTEM_PROMPT_PATH
from looplab.shared_tools import Guard, Workspace
from tests.conftest import FIXTURE_REPO
from tests.paths import REPO

ROOT = REPO
SUITE = BUILTIN_SUITE
URL = "http://127.0.0.1:9/v1/chat/completions"
#: A reply in DSPy's field format naming a tool, as the only request it makes: no native tool call.
FIELDS_REPLY = "[[ ## next_thought ## ]]\nrun it\n\n[[ ## next_tool_name ## ]]\nrun_tests\n\n[[ ## completed ## ]]"


def _chat_reply(text: str, tool: str | None = None) -> bytes:
    message: dict = {"role": "assistant", "content": text}
    if tool is not None:
        message["tool_calls"] = [{"id": "c1", "type": "function", "function": {"name": tool, "arguments": "{}"}}]
    usage = {"prompt_tokens": 10, "completion_tokens": 5}
    return json.dumps({"choices": [{"message": message, "finish_reason": "stop"}], "usage": usage}).encode()


def _requested(recorder: ModelRecorder, reply: bytes) -> list[str]:
    """The tools the recorder puts on the call for `reply`."""
    recorder.exchange(URL, b"{}").whole(200, {}, reply)
    return recorder.calls[-1].tool_calls_requested


def test_without_a_reader_a_tool_named_in_a_replys_text_is_not_a_tool_call() -> None:
    assert _requested(ModelRecorder(clock=lambda: 0.0), _chat_reply(FIELDS_REPLY)) == []
    as_json = json.dumps({"next_thought": "t", "next_tool_name": "read_file", "next_tool_args": {}})
    assert _requested(ModelRecorder(clock=lambda: 0.0), _chat_reply(as_json)) == []


def test_with_dspys_reader_the_tool_its_reply_names_is_requested_and_finish_is_not() -> None:
    pytest.importorskip("dspy")
    from looplab.adapters.runners.dspy import RUNNER

    recorder = ModelRecorder(clock=lambda: 0.0, tools_named_in_text=RUNNER.tools_named_in_text)
    assert _requested(recorder, _chat_reply(FIELDS_REPLY)) == ["run_tests"]
    assert _requested(recorder, _chat_reply(FIELDS_REPLY.replace("run_tests", "finish"))) == []
    # A reply with a native tool call is read as one: the text is not read then.
    assert _requested(recorder, _chat_reply(FIELDS_REPLY, tool="read_file")) == ["read_file"]


class _TextProtocol(Runner):
    """A runner whose replies name their tool as `CALL <name>`; its loop sends one request through the recorder."""

    name, extra, distribution, knobs = "text-protocol", "none", "pytest", ("steps",)

    def native_cap(self, limits: Limits) -> NativeCap:
        return NativeCap(knob="steps", value=limits.max_steps)

    def tools_named_in_text(self, text: str) -> list[str]:
        return re.findall(r"CALL (\w+)", text)

    def loop(self, task: str, session: RunSession) -> Finished:
        session.recorder.exchange(URL, b"{}").whole(200, {}, _chat_reply("CALL search_code"))
        return Finished(StopReason.FINAL_ANSWER, "done")


def test_a_run_records_with_its_runners_reader() -> None:
    spec = ModelSpec("openai", "none", base_url="http://127.0.0.1:9/v1")
    with Workspace(FIXTURE_REPO) as ws:
        result = _TextProtocol().run("task", Guard(ws), Limits(), spec, system_prompt="unused")
    assert [s.model_call.tool_calls_requested for s in result.trace.steps] == [["search_code"]]


#: A framework's event stack that a run ending in an exception leaves pushed (CrewAI's did, and raised once 100 deep).
_EVENT_STACK: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("event_stack", default=())


class _LeavesItsStack(_TextProtocol):
    def loop(self, task: str, session: RunSession) -> Finished:
        depth = len(_EVENT_STACK.get())
        _EVENT_STACK.set((*_EVENT_STACK.get(), "kickoff"))
        raise RuntimeError(f"depth {depth}")  # raised before the matching pop, as an error mid-run does


def test_what_a_framework_leaves_in_its_context_variables_ends_with_the_run() -> None:
    spec = ModelSpec("openai", "none", base_url="http://127.0.0.1:9/v1")
    with Workspace(FIXTURE_REPO) as ws:
        ends = [
            _LeavesItsStack().run("task", Guard(ws), Limits(), spec, system_prompt="unused").native_end.message
            for _ in range(3)
        ]
    assert ends == ["depth 0"] * 3 and _EVENT_STACK.get() == ()


def test_the_boundary_names_no_runners_text_protocol() -> None:
    for path in sorted((ROOT / "adapters" / "boundary").glob("*.py")):
        assert "next_tool_name" not in path.read_text(encoding="utf-8"), path


#: Words as the scan compares them: case and punctuation aside.
WORD = re.compile(r"[\w./:=-]+")
#: How many words in a row a runner may share with a scenario's sentence (a longer run is its text).
SHARED_WORDS = 5


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _words(text: str) -> list[str]:
    return [w.strip(".:=-").lower() for w in WORD.findall(text)]


def _scenario_text() -> tuple[set[tuple[str, ...]], set[str]]:
    """The built-in suite's sentences (every run of `SHARED_WORDS` words, or a shorter one whole) and its names of
    things in the fixture (paths and the identifiers the checks look for), from its case files and system prompt."""
    cases = [tomllib.loads(p.read_text(encoding="utf-8")) for p in sorted((SUITE / "cases").glob("*.toml"))]
    texts = [s for case in cases for s in _strings(case)] + [DEFAULT_SYSTEM_PROMPT_PATH.read_text(encoding="utf-8")]
    runs: set[tuple[str, ...]] = set()
    for words in (_words(t) for t in texts if len(t.split()) > 1):
        n = min(SHARED_WORDS, len(words))
        runs |= {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}
    mentioned = {s for case in cases for s in case.get("checks", {}).get("answer_mentions", [])}
    # A one-word name counts when it is a path or an identifier: a plain word ("passes") is anyone's.
    named = [_words(s) for s in [*texts, *mentioned] if "/" in s or s in mentioned and "_" in s]
    names = {words[0] for words in named if len(words) == 1}
    return runs, names


def _runner_sources() -> list[Path]:
    folder = ROOT / "adapters" / "runners"
    return sorted(p for p in folder.rglob("*") if p.suffix in (".py", ".mjs") and "node_modules" not in p.parts)


def _shared(source: str, runs: set[tuple[str, ...]], names: set[str]) -> list[str]:
    """The scenario text `source` carries: the runs of words it shares, and the names it mentions."""
    words = _words(source)
    grams = {tuple(words[i : i + n]) for n in {len(r) for r in runs} for i in range(len(words) - n + 1)}
    return sorted({" ".join(r) for r in runs & grams} | (names & set(words)))


def test_the_scan_finds_scenario_text_where_it_is() -> None:
    runs, names = _scenario_text()
    assert _shared('Task(expected_output="the function, the file and the cause")', runs, names)  # the prompt's words
    assert _shared("target = 'tests/test_invoice.py::test_invoice_total'", runs, names)
    assert _shared("assert 'apply_discount' in answer", runs, names)
    assert not _shared("`max_steps` counts model calls; the run stops as error", runs, names)


def test_no_runner_carries_scenario_text() -> None:
    runs, names = _scenario_text()
    sources = _runner_sources()
    assert len(sources) > 10
    found = {str(p.relative_to(ROOT)): hits for p in sources if (hits := _shared(p.read_text("utf-8"), runs, names))}
    assert found == {}, f"scenario text in runner modules (it reaches a runner through the task and prompt): {found}"
