"""DSPy's text-field protocol in the scripted model (`scenarios/scripted/fields.py`).

Requests are written by DSPy's own adapters and replies read back by them, so the round trips check the
protocol as DSPy speaks it, with generated trajectories, tools and texts.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from looplab.scenarios.scripted import fields
from looplab.scenarios.scripted.conversation import Conversation
from looplab.scenarios.scripted.policy import Call, Decision

dspy = pytest.importorskip("dspy")

HEADER_LIKE = re.compile(r"\[\[ ## \w+ ## \]\]")
names = st.from_regex(r"[a-z][a-z_]{0,11}", fullmatch=True).filter(lambda n: n != fields.FINISH)
#: DSPy's parser splits replies with `str.splitlines`, which also breaks at these: it reads them back as newlines.
LINE_BREAKS = "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
text = (
    st.text(st.characters(exclude_categories=("Cs",), exclude_characters=LINE_BREAKS), max_size=80)
    .map(str.strip)
    .filter(lambda t: not HEADER_LIKE.search(t) and fields.CHAT_REMINDER not in t and fields.JSON_REMINDER not in t)
)
args = st.dictionaries(names, text, max_size=3)


@functools.cache
def _agent(tools: tuple[str, ...]) -> Any:
    def tool(name: str) -> Any:
        return dspy.Tool(lambda **kw: "", name=name, desc=f"the {name} tool", args={"x": {"type": "string"}})

    return dspy.ReAct(dspy.Signature("task -> answer", "Investigate."), tools=[tool(n) for n in tools])


def _request(agent: Any, module: Any, task: str, trajectory: dict[str, Any], adapter: Any) -> fields.FieldRequest:
    """The request DSPy sends for `module` at `trajectory`, read by the scripted model."""
    inputs = {"task": task, "trajectory": agent._format_trajectory(trajectory)}
    messages = adapter.format(module.signature, demos=[], inputs=inputs)
    request = fields.read([(m["role"], m["content"]) for m in messages], "scripted")
    assert request is not None
    return request


steps = st.lists(st.tuples(text, st.integers(0, 2), args, text), max_size=5)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tools=st.lists(names, min_size=1, max_size=3, unique=True), task=text, trajectory=steps)
def test_a_trajectory_dspy_writes_reads_back_step_for_step(tools: list[str], task: str, trajectory: list) -> None:
    agent = _agent(tuple(tools))
    written: dict[str, Any] = {}
    for i, (thought, which, call_args, observation) in enumerate(trajectory):
        written |= {
            f"thought_{i}": thought,
            f"tool_name_{i}": tools[which % len(tools)],
            f"tool_args_{i}": call_args,
            f"observation_{i}": observation,
        }
    request = _request(agent, agent.react, task, written, dspy.ChatAdapter())
    assert (request.kind, request.fmt, request.task, request.tools) == ("react", "chat", task, tuple(tools))
    assert [(s.thought, s.tool_name, s.observation) for s in request.steps] == [
        (written[f"thought_{i}"], written[f"tool_name_{i}"], written[f"observation_{i}"])
        for i in range(len(trajectory))
    ]
    conv = request.conversation()
    assert conv.assistant_turns == len(trajectory)
    assert [(r.call.name, r.call.args, r.content) for r in conv.results] == [
        (written[f"tool_name_{i}"], written[f"tool_args_{i}"], written[f"observation_{i}"])
        for i in range(len(trajectory))
    ]
    extract = _request(agent, agent.extract.predict, task, written, dspy.ChatAdapter())
    assert (extract.kind, extract.outputs) == ("extract", ("reasoning", "answer"))


@settings(deadline=None)
@given(name=names, call_args=args, answer=text.filter(bool), fmt=st.sampled_from(["chat", "json"]))
def test_a_reply_reads_back_in_dspy_as_the_decision(name: str, call_args: dict, answer: str, fmt: str) -> None:
    agent = _agent((name,))
    request = _request(agent, agent.react, "task", {}, dspy.JSONAdapter() if fmt == "json" else dspy.ChatAdapter())
    assert request.fmt == fmt
    adapter = dspy.JSONAdapter() if fmt == "json" else dspy.ChatAdapter()
    signature = agent.react.signature
    call = adapter.parse(signature, fields.render(request, Decision((Call(name, call_args),))))
    assert (call["next_tool_name"], call["next_tool_args"]) == (name, call_args)
    done = adapter.parse(signature, fields.render(request, Decision(answer=answer)))
    assert (done["next_thought"], done["next_tool_name"], done["next_tool_args"]) == (answer, "finish", {})


@given(answer=text.filter(bool))
@settings(deadline=None)
def test_the_extract_call_is_answered_with_the_policys_answer_or_none(answer: str) -> None:
    agent = _agent(("read_file",))
    request = _request(agent, agent.extract.predict, "task", {}, dspy.ChatAdapter())
    signature = agent.extract.predict.signature
    assert dspy.ChatAdapter().parse(signature, fields.render(request, Decision(answer=answer)))["answer"] == answer
    unsure = fields.render(request, Decision((Call("read_file", {"path": "a.py"}),)))
    assert dspy.ChatAdapter().parse(signature, unsure)["answer"] == ""


def test_a_botched_call_is_written_as_the_model_wrote_it() -> None:
    agent = _agent(("read_file",))
    request = _request(agent, agent.react, "task", {}, dspy.ChatAdapter())
    reply = fields.render(request, Decision((Call("read_file", '{"path": a.py}'),)))
    assert '[[ ## next_tool_args ## ]]\n{"path": a.py}\n' in reply
    unknown = fields.render(request, Decision((Call("run_shell", {"command": "ls"}),)))
    with pytest.raises(dspy.utils.exceptions.AdapterParseError):  # DSPy refuses a tool it did not offer
        dspy.ChatAdapter().parse(agent.react.signature, unknown)


def _reads_two(conv: Conversation) -> Decision:
    if not conv.results:
        return Decision((Call("read_file", {"path": "a.py"}), Call("read_file", {"path": "b.py"})))
    return Decision(answer="read " + ", ".join(r.call.args["path"] for r in conv.results))


def test_several_calls_in_one_decision_go_out_one_a_reply() -> None:
    agent = _agent(("read_file",))
    trajectory: dict[str, Any] = {}
    made = []
    for i in range(3):
        request = _request(agent, agent.react, "task", trajectory, dspy.ChatAdapter())
        step = dspy.ChatAdapter().parse(
            agent.react.signature, fields.render(request, fields.decide(request, _reads_two))
        )
        made.append((step["next_tool_name"], step["next_tool_args"]))
        trajectory |= {
            f"thought_{i}": step["next_thought"],
            f"tool_name_{i}": step["next_tool_name"],
            f"tool_args_{i}": step["next_tool_args"],
            f"observation_{i}": "content",
        }
    assert made == [("read_file", {"path": "a.py"}), ("read_file", {"path": "b.py"}), ("finish", {})]
    assert trajectory["thought_2"] == "read a.py, b.py"


def test_a_request_without_the_field_protocol_is_not_read_as_one() -> None:
    assert fields.read([("system", "You are helpful."), ("user", "Why does tests/x.py fail?")], "m") is None


tool_names = st.from_regex(r"[a-z_][a-z0-9_]{0,20}", fullmatch=True)


@settings(deadline=None)
@given(name=tool_names, json_form=st.booleans(), streamed=st.booleans(), api=st.sampled_from(["chat", "messages"]))
def test_the_recorder_reads_the_tool_a_text_reply_names(name: str, json_form: bool, streamed: bool, api: str) -> None:
    """DSPy's tool requests are text: with DSPy's reader, the model boundary puts the named tool (not `finish`) on
    the call."""
    import json

    from looplab.adapters.boundary.wire import parse_exchange
    from looplab.adapters.runners.dspy import FINISH, RUNNER

    text = (
        json.dumps({"next_thought": "t", "next_tool_name": name, "next_tool_args": {}})
        if json_form
        else f"[[ ## next_thought ## ]]\nt\n\n[[ ## next_tool_name ## ]]\n{name}\n\n[[ ## completed ## ]]"
    )
    half = len(text) // 2
    if api == "chat":
        events = [{"choices": [{"delta": {"content": part}}]} for part in (text[:half], text[half:])]
        whole = {"choices": [{"message": {"content": text}, "finish_reason": "stop"}]}
        endpoint = "chat.completions"
    else:
        events = [
            {"type": "content_block_delta", "delta": {"type": "text_delta", "text": p}}
            for p in (text[:half], text[half:])
        ]
        whole = {"type": "message", "content": [{"type": "text", "text": text}], "stop_reason": "end_turn"}
        endpoint = "messages"
    if streamed:
        body = "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode()
        info = parse_exchange(endpoint, body, RUNNER.tools_named_in_text)
    else:
        info = parse_exchange(endpoint, json.dumps(whole).encode(), RUNNER.tools_named_in_text)
    assert info.tool_calls_requested == ([] if name == FINISH else [name])
