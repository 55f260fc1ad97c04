"""The scripted investigator decides from evidence, so other repos and other tool answers change its path."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from looplab.adapters.contract.agents import Delegate
from looplab.scenarios.cases import CODE_READER_DESCRIPTION
from looplab.scenarios.scripted import policy
from looplab.scenarios.scripted.conversation import (
    _ERROR_PREFIXES,
    ChatRequest,
    Conversation,
    ToolCall,
    ToolResult,
    from_chat,
)
from looplab.scenarios.scripted.policy import Call, Decision, Evidence, Investigator
from looplab.scenarios.scripted.reading import Site
from looplab.shared_tools import Guard, Workspace
from tests.conftest import FIXTURE_REPO, TASK


def investigate(repo: Path, task: str = TASK, max_turns: int = 12, tamper=None) -> tuple[list[str], Decision]:
    """Drive the policy directly against the real tools; `tamper` may rewrite a tool result."""
    with Workspace(repo) as ws:
        guard = Guard(ws)
        conv = Conversation(task=task, tools=guard.names)
        path: list[str] = []
        for turn in range(max_turns):
            decision = Investigator().decide(conv)
            if decision.answer is not None or guard.stop:
                return path, decision
            for i, call in enumerate(decision.calls):
                record = guard.call(call.name, call.args)
                content = tamper(call, record.result) if tamper else record.result
                conv.results.append(ToolResult(ToolCall(f"{turn}-{i}", call.name, call.args), content, record.is_error))
                path.append(f"{call.name}({next(iter(call.args.values()))})")
            conv.assistant_turns += 1
    return path, Decision()


def test_base_case_trajectory_and_answer() -> None:
    path, decision = investigate(FIXTURE_REPO)
    assert path == [
        "run_tests(tests/test_invoice.py::test_invoice_total)",
        "read_file(tests/test_invoice.py)",
        "search_code(def apply_discount)",
        "read_file(billing/discount.py)",
    ]
    assert "`apply_discount` in billing/discount.py" in decision.answer
    assert "assert Decimal('90.25') == Decimal('90.00')" in decision.answer
    assert "expected Decimal('90.00'), got Decimal('90.25')" in decision.answer
    assert "Read: tests/test_invoice.py 23-26, billing/discount.py 15-20." in decision.answer


@pytest.fixture
def renamed_repo(tmp_path: Path) -> Path:
    """The same bug under other names and in another file: nothing in the policy may know them."""
    repo = tmp_path / "shop"
    shutil.copytree(FIXTURE_REPO, repo)
    (repo / "billing" / "discount.py").unlink()
    (repo / "billing" / "rebates.py").write_text(
        "from decimal import Decimal\n\n"
        "from billing.money import to_cents\n\n"
        "LOYALTY = Decimal('0.05')\nGOLD = Decimal('0.05')\n\n\n"
        "def rebate_for(amount, tier):\n"
        "    price = amount * (1 - LOYALTY)\n"
        "    if tier == 'VIP':\n"
        "        price *= (1 - GOLD)\n"
        "    return to_cents(price)\n"
    )
    test = repo / "tests" / "test_invoice.py"
    test.write_text(
        test.read_text()
        .replace("from billing.discount import apply_discount", "from billing.rebates import rebate_for")
        .replace("apply_discount(", "rebate_for(")
    )
    return repo


def test_a_renamed_bug_elsewhere_is_found_by_following_the_evidence(renamed_repo: Path) -> None:
    path, decision = investigate(renamed_repo)
    assert path[2:] == ["search_code(def rebate_for)", "read_file(billing/rebates.py)"]
    assert "`rebate_for` in billing/rebates.py" in decision.answer and "LOYALTY + GOLD" in decision.answer


def test_a_fixed_repo_gets_no_invented_bug(tmp_path: Path) -> None:
    repo = tmp_path / "fixed"
    shutil.copytree(FIXTURE_REPO, repo)
    module = repo / "billing" / "discount.py"
    module.write_text(
        module.read_text().replace(
            "discounted = discounted * (1 - VIP_EXTRA_RATE)", "discounted = amount * (1 - BASE_RATE - VIP_EXTRA_RATE)"
        )
    )
    path, decision = investigate(repo)
    assert path == ["run_tests(tests/test_invoice.py::test_invoice_total)"]
    assert "nothing is broken" in decision.answer


def test_a_tool_that_answers_ok_is_asked_again() -> None:
    def lie(call, result):
        return "ok" if call.name == "read_file" else result

    path, decision = investigate(FIXTURE_REPO, tamper=lie)
    assert path[1:] == ["read_file(tests/test_invoice.py)"] * 3
    assert decision.answer is None  # the Guard ended it on the third identical read


def test_a_moved_test_file_is_recovered_from_the_tools_hint() -> None:
    task = TASK.replace("tests/test_invoice.py", "tests/test_invoce.py")
    path, decision = investigate(FIXTURE_REPO, task=task)
    assert path[:2] == [
        "run_tests(tests/test_invoce.py::test_invoice_total)",
        "run_tests(tests/test_invoice.py::test_invoice_total)",
    ]
    assert "apply_discount" in decision.answer


def test_a_task_without_a_test_gets_a_plain_answer() -> None:
    path, decision = investigate(FIXTURE_REPO, task="Something is wrong with billing.")
    assert path == [] and "names no test" in decision.answer


@settings(deadline=None)
@given(text=st.text(max_size=200), failed=st.booleans())
def test_a_tool_result_wrapped_as_result_or_error_json_is_read_as_its_text(text: str, failed: bool) -> None:
    """Frameworks send a tool's text as `{"result": text}` (ADK over Chat Completions) or `{"error": text}`."""
    conv, pending = Conversation(), {}
    conv._add_call(pending, "c1", "read_file", {"path": "a.py"})
    conv._add_result(pending, "c1", json.dumps({"error" if failed else "result": text}), False)
    [result] = conv.results
    assert result.content == text
    assert result.is_error is (failed or text.startswith(_ERROR_PREFIXES))


def test_a_result_object_with_more_than_the_text_stays_as_sent() -> None:
    conv, pending = Conversation(), {}
    conv._add_call(pending, "c1", "read_file", {"path": "a.py"})
    sent = json.dumps({"result": "x", "status": "ok"})
    conv._add_result(pending, "c1", sent, False)
    assert conv.results[0].content == sent and not conv.results[0].is_error


@settings(deadline=None)
@given(
    calls=st.lists(
        st.tuples(st.sampled_from(["run_tests", "read_file", "search_code"]), st.dictionaries(st.text(), st.text())),
        min_size=1,
        max_size=3,
    ),
    observation=st.text(),
)
def test_tool_calls_and_results_written_as_text_are_read_like_native_ones(calls, observation: str) -> None:
    """smolagents writes its history as text: `Calling tools:` and the calls' Python repr, then `Observation:`."""
    written = [
        {"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": a}}
        for i, (n, a) in enumerate(calls)
    ]
    messages = [
        {"role": "user", "content": TASK},
        {"role": "assistant", "content": f"Thinking.\nCalling tools:\n{written!r}"},
        {"role": "user", "content": f"Observation:\n{observation}"},
    ]
    conv = from_chat(ChatRequest.model_validate({"model": "scripted", "messages": messages}))
    assert [(r.call.name, r.call.args) for r in conv.results] == [(n, a) for n, a in calls]
    # One text for the step's calls: the last call's result; the policy asks again for the others.
    assert [r.content for r in conv.results] == [""] * (len(calls) - 1) + [observation]


# --- two agents: the investigator hands "where is it defined" to a delegate --------------------------------


def _delegating(repo: Path, three_hops: bool = False) -> tuple[list[str], list[list[str]], Decision]:
    """The investigator with a `code_reader` tool offered (its description as a framework sends it); each call of it
    is a fresh conversation of the delegate, whose task is the question. The parent's path, each child's, the end."""
    with Workspace(repo) as ws:
        guard = Guard(ws)
        conv = Conversation(task=TASK, tools=[*guard.names, "code_reader"])
        conv._offer("code_reader", CODE_READER_DESCRIPTION, {"properties": {"input": {"type": "string"}}})
        path: list[str] = []
        children: list[list[str]] = []
        for turn in range(12):
            decision = Investigator().decide(conv)
            if decision.answer is not None:
                return path, children, decision
            for i, call in enumerate(decision.calls):
                if call.name == "code_reader":
                    child_path, child_end = investigate(repo, task=call.args["input"])
                    children.append(child_path)
                    content = child_end.answer or ""
                else:
                    content = guard.call(call.name, call.args).result
                conv.results.append(ToolResult(ToolCall(f"{turn}-{i}", call.name, call.args), content, False))
                path.append(f"{call.name}({next(iter(call.args.values()))})")
            conv.assistant_turns += 1
    return path, children, Decision()


def test_an_offered_delegate_is_handed_the_definition_and_its_answer_is_read_back() -> None:
    path, children, decision = _delegating(FIXTURE_REPO)
    assert path[:2] == ["run_tests(tests/test_invoice.py::test_invoice_total)", "read_file(tests/test_invoice.py)"]
    assert path[2].startswith("code_reader(Find where `apply_discount` is defined") and len(path) == 3
    assert children == [["search_code(def apply_discount)", "read_file(billing/discount.py)"]]
    # The same answer as searching and reading itself: the delegate's report stands for both.
    assert "`apply_discount` in billing/discount.py" in decision.answer
    assert "expected Decimal('90.00'), got Decimal('90.25')" in decision.answer


def test_a_delegate_that_finds_nothing_leaves_the_investigator_to_search_itself(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURE_REPO, repo)
    conv = Conversation(task=TASK, tools=["run_tests", "read_file", "search_code", "code_reader"])
    conv._offer("code_reader", CODE_READER_DESCRIPTION, {"properties": {"input": {"type": "string"}}})
    question = Delegate.question("apply_discount")
    conv.results.append(ToolResult(ToolCall("1", "code_reader", {"input": question}), "I could not tell.", False))
    site = Site("apply_discount", ("discount",))
    found = policy._where(conv, Evidence.of(conv), site, "tests/test_invoice.py", None, {}, [])
    assert found == Decision((Call("search_code", {"query": "def apply_discount"}),))
