"""The noisy-model case: a scripted model that slips at random, its dice seeded by the case's repeat, so that
statistics over repeats can be tested offline. The same repeat plays the same way every time; over 20 repeats some
runs pass and some fail; the case runs only when named."""

from __future__ import annotations

import copy
import dataclasses
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from looplab.records import results
from looplab.records.identity import case_hash
from looplab.records.outcome import RunOutcome
from looplab.run.harness import Endpoint, ModelChoice, run_one
from looplab.run.matrix import run_matrix
from looplab.scenarios.cases import BUILTIN_SUITE, Case, load_cases
from looplab.scenarios.scripted.conversation import (
    MAX_SEED_CHARS,
    SEED_HEADER,
    Conversation,
    MalformedRequest,
    ToolCall,
    ToolResult,
    seed_named,
)
from looplab.scenarios.scripted.policy import Investigator
from looplab.scenarios.scripted.requests import RequestLog
from looplab.scenarios.scripted.server import ScriptedModelServer
from looplab.scenarios.scripted.slips import MISTAKES, SLIPS, Decision, Slip, slip
from looplab.shared_tools import Fault, Guard, Workspace

CASE = load_cases(every=True)["noisy-model"]
REPEATS = 20
#: A seed as a header carries it: visible ASCII.
seeds = st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=40)


@pytest.fixture(scope="module")
def replayed() -> Case:
    """The case with its test run replayed: the fixture's pytest output, recorded once here, is what run_tests answers
    (a silent fault). The model decides from the same text, so a run plays as the real one does, in a tenth of the
    time (no pytest process)."""
    with Workspace(CASE.repo_path) as ws:
        output = Guard(ws).call("run_tests", {"target": CASE.target}).result
    assert "assert" in output  # the failing run, not an error
    return CASE.model_copy(update={"faults": [Fault(tool="run_tests", kind="silent", text=output)]})


@pytest.fixture(scope="module")
def where() -> Iterator[Endpoint]:
    with ScriptedModelServer() as server:
        yield Endpoint(ModelChoice(), server.base_urls)


def played(outcome: RunOutcome) -> tuple[object, ...]:
    """What a run did, as compared between two runs: its outcome, its stop, its answer and every tool call."""
    assert outcome.result is not None, outcome.error
    calls = [(c.name, c.first_arg, c.outcome) for c in outcome.result.trace.tool_calls]
    return outcome.passed, outcome.result.stop_reason, outcome.result.answer, calls


# --- the same repeat, the same run; over 20 repeats, some pass and some fail ------------------------------------


def test_the_same_repeat_plays_the_same_way_twice(replayed: Case, where: Endpoint) -> None:
    for k in (1, 2, 3):
        seeded = replayed.for_repeat(k)
        assert played(run_one("handrolled", seeded, where)) == played(run_one("handrolled", seeded, where))


@pytest.mark.parametrize(
    ("runner", "replay"),
    [
        pytest.param("handrolled", True, id="handrolled-replayed"),
        pytest.param("handrolled", False, id="handrolled", marks=pytest.mark.full),
        pytest.param("langgraph", False, id="langgraph", marks=pytest.mark.full),
    ],
)
def test_over_20_repeats_some_runs_pass_and_some_fail(
    runner: str, replay: bool, replayed: Case, where: Endpoint
) -> None:
    """The fast tier replays the test run (the same decisions, a tenth of the time); the full tier runs pytest."""
    outcomes = run_matrix([runner], [replayed if replay else CASE], where, repeat=REPEATS, concurrency=2)
    assert [o.repeat for o in outcomes] == list(range(1, REPEATS + 1))
    passed = sum(o.passed for o in outcomes)
    assert 0 < passed < REPEATS, [played(o)[:2] for o in outcomes]


def test_a_matrix_runs_each_repeat_with_its_own_seed_and_records_the_case_as_loaded(replayed: Case) -> None:
    log = RequestLog()
    with ScriptedModelServer(wrap=log.wrap) as server:
        outcomes = run_matrix(["handrolled"], [replayed], Endpoint(ModelChoice(), server.base_urls), repeat=3)
    assert [(o.case, o.repeat) for o in outcomes] == [("noisy-model", 1), ("noisy-model", 2), ("noisy-model", 3)]
    # every request of a run carried its repeat's seed, in the order the repeats ran
    sent = [r.headers.get(SEED_HEADER) for r in log.posts()]
    assert list(dict.fromkeys(sent)) == ["noisy-model#1", "noisy-model#2", "noisy-model#3"]
    assert replayed.model.seed is None  # only the copies that ran were seeded
    doc = results.build(outcomes, runners=["handrolled"], cases=[replayed])
    assert doc.cases["noisy-model"].hash == case_hash(replayed)


# --- the policy's noise: a property of the seed, the agent and the turn ---------------------------------------------


@pytest.fixture(scope="module")
def careful_turns(replayed: Case) -> list[Conversation]:
    """The conversation before each decision of the careful investigation (four tool turns, then the answer),
    driven against the case's tools directly."""
    with Workspace(replayed.repo_path) as ws:
        guard = Guard(ws, tools=replayed.tool_set())
        conv = Conversation(task=replayed.stated_task, tools=guard.names)
        turns = [copy.deepcopy(conv)]
        while (decision := Investigator().decide(conv)).answer is None:
            for i, call in enumerate(decision.calls):
                record = guard.call(call.name, call.args)
                conv.results.append(ToolResult(ToolCall(f"{i}", call.name, call.args), record.result, record.is_error))
            conv.assistant_turns += 1
            turns.append(copy.deepcopy(conv))
    assert len(turns) == 5
    return turns


def noisy(conv: Conversation, seed: str) -> Conversation:
    return dataclasses.replace(conv, persona="noisy", seed=seed)


def kind_of(decision: Decision, meant: Decision) -> Slip | None:
    """Which slip `decision` is, against the careful one (`meant`); None when it is the careful one. Anything else
    fails the test."""
    if decision == meant:
        return None
    if decision.answer is not None:
        assert meant.answer is None and "cause is not established" in decision.answer
        return "premature"
    (call,) = decision.calls
    if call in [mistake(meant.calls[0]) for mistake in MISTAKES]:
        return "malformed"
    assert call.name == "read_file" and call.args != meant.calls[0].args, decision
    return "wrong_read"


@given(seed=seeds, turn=st.integers(0, 4))
def test_a_noisy_turn_is_decided_by_its_seed_and_turn(careful_turns: list[Conversation], seed: str, turn: int) -> None:
    conv = noisy(careful_turns[turn], seed)
    decided = Investigator().decide(conv)
    assert Investigator().decide(copy.deepcopy(conv)) == decided  # asked again (a retried request): the same
    meant = Investigator().decide(careful_turns[turn])
    kind = kind_of(decided, meant)
    assert kind == (slip(conv) if meant.answer is None else None)  # its answer is careful's: no slip then


def test_across_seeds_every_kind_of_slip_occurs(careful_turns: list[Conversation]) -> None:
    meant = [(conv, Investigator().decide(conv)) for conv in careful_turns[:4]]  # the four tool turns
    decided = Counter(
        kind_of(Investigator().decide(noisy(conv, f"s{n}")), then) for n in range(60) for conv, then in meant
    )
    assert set(decided) == {None, "malformed", "wrong_read", "premature"}, decided


def test_each_slip_comes_at_its_chance_and_each_turn_and_agent_rolls_its_own() -> None:
    rolls = 5000
    kinds = Counter(slip(Conversation(task="t", seed=f"case#{n}")) for n in range(rolls))
    for kind, chance in SLIPS.items():
        assert abs(kinds[kind] / rolls - chance) < 0.02, kinds
    by_turn = [[slip(Conversation(task="t", seed=f"s{n}", assistant_turns=t)) for n in range(200)] for t in (0, 1)]
    by_agent = [[slip(Conversation(task=task, seed=f"s{n}")) for n in range(200)] for task in ("t", "u")]
    assert by_turn[0] != by_turn[1] and by_agent[0] != by_agent[1]


# --- the seed header -------------------------------------------------------------------------------------------------


def test_the_seed_header_is_read_and_an_oversized_one_refused() -> None:
    assert seed_named(None) == "" and seed_named("noisy-model#3") == "noisy-model#3"
    with pytest.raises(MalformedRequest, match=SEED_HEADER):
        seed_named("x" * (MAX_SEED_CHARS + 1))
    body = {"model": "scripted", "messages": [{"role": "user", "content": CASE.task}]}
    with ScriptedModelServer() as server, httpx.Client(base_url=server.openai_base_url, timeout=30) as http:
        fits = http.post("/chat/completions", json=body, headers={SEED_HEADER: "x" * MAX_SEED_CHARS})
        refused = http.post("/chat/completions", json=body, headers={SEED_HEADER: "x" * (MAX_SEED_CHARS + 1)})
    assert fits.status_code == 200
    assert refused.status_code == 400 and SEED_HEADER in refused.json()["error"]["message"]


def test_a_repeat_seeds_a_copy_that_keeps_its_file_and_a_header_can_carry() -> None:
    seeded = CASE.for_repeat(7)
    assert (seeded.model.seed, seeded.file, seeded.suite) == ("noisy-model#7", CASE.file, CASE.suite)
    assert seeded.model.headers == {"x-looplab-persona": "noisy", SEED_HEADER: "noisy-model#7"}
    assert CASE.model.seed is None and SEED_HEADER not in CASE.model.headers
    odd = CASE.model_copy(update={"id": "café " * 100}).for_repeat(2).model.seed
    assert odd is not None and odd.isascii() and " " not in odd and len(odd) <= MAX_SEED_CHARS and odd.endswith("#2")


# --- run only when named ---------------------------------------------------------------------------------------------


def test_the_case_runs_only_when_named() -> None:
    from looplab.cli import _parser
    from looplab.cli._inputs import select

    assert "noisy-model" not in load_cases() and "noisy-model" in load_cases(every=True)
    assert not CASE.by_default and all(c.by_default for c in load_cases().values())
    assert list(load_cases([BUILTIN_SUITE / "cases" / "noisy-model.toml"])) == ["noisy-model"]  # its file, named
    _, named = select(_parser().parse_args(["eval", "--case", "noisy-model", "--runner", "handrolled"]), None)
    _, default = select(_parser().parse_args(["eval", "--runner", "handrolled"]), None)
    assert [c.id for c in named] == ["noisy-model"]
    assert [c.id for c in default] == list(load_cases())
