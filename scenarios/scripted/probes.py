"""Probe policies: scripted models that exercise a loop's cap rather than investigate.

`NeverStops` asks for a fresh tool call every turn (never the same one twice,
so repetition detection stays out of the way); `AnswersOnCall(k)` does the
same and answers on its k-th model call; `EndsByToolOnCall(k)` asks on its k-th for a tool the runner marks as
ending the run; `DelegatesToOneThatNeverStops` hands one
question (or several in one reply) to the agent its delegating tool starts, which
never stops (or hands it on, in a nested tree), and answers with what came back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

from pydantic import Field

from looplab.adapters.contract.agents import QUESTION, Delegate
from looplab.scenarios.scripted.conversation import Conversation
from looplab.scenarios.scripted.policy import Call, Decision
from looplab.shared_tools import Tool, Workspace

__all__ = [
    "AnswersOnCall",
    "DelegatesToOneThatNeverStops",
    "EndsByToolOnCall",
    "NeverStops",
    "PARENT_SAW",
    "REPORT",
    "REPORTED",
    "policy_named",
]

#: How the delegating probe's parent begins its answer; what follows is what its delegating tool returned.
PARENT_SAW = "the delegate returned: "
#: The function the delegating probe's parent asks about (the child never answers, so any name serves).
PROBE_FUNCTION = "probe_target"


@dataclass(frozen=True)
class NeverStops:
    """Always one more tool call; the loop's cap is the only way out."""

    def __call__(self, conv: Conversation) -> Decision:
        turn = conv.assistant_turns + 1
        return Decision((Call("search_code", {"query": f"probe_{turn}"}),))


@dataclass(frozen=True)
class AnswersOnCall:
    """Tool calls until model call `k`, which answers."""

    k: int

    def __call__(self, conv: Conversation) -> Decision:
        turn = conv.assistant_turns + 1
        if turn >= self.k:
            return Decision(answer=f"answered on model call {turn}")
        return NeverStops()(conv)


def report(ws: Workspace, text: Annotated[str, Field(description="What to report.")]) -> str:
    """Report what was found; the report is the run's result."""
    return f"{REPORTED}{text}"


#: What the `report` tool's result begins with.
REPORTED = "reported: "
#: The tool a probe run's agent is offered besides the shared ones, for `EndsByToolOnCall` to ask for: its result
#: is known whatever the repo holds, and nothing else calls it.
REPORT = Tool.from_function(report)
#: What `EndsByToolOnCall` answers when the framework called the model again after the ending tool.
WENT_ON = "the run went on after the ending tool"


@dataclass(frozen=True)
class EndsByToolOnCall:
    """Tool calls until model call `k`, which asks for `report` alone: a runner that marks `report` as ending the run
    (`Probe.ending_tool`) ends it there with the tool's result; on a later call (the framework went on) it answers
    `WENT_ON`."""

    k: int

    def __call__(self, conv: Conversation) -> Decision:
        turn = conv.assistant_turns + 1
        if turn > self.k:
            return Decision(answer=WENT_ON)
        if turn == self.k:
            return Decision((Call(REPORT.name, {"text": f"asked on model call {turn}"}),))
        return NeverStops()(conv)


@dataclass(frozen=True)
class DelegatesToOneThatNeverStops:
    """The parent hands `at_once` questions to its delegating tool in one reply and answers with what came back
    (`PARENT_SAW`, then each result, marked when it was an error); the agent each question starts never stops, or,
    where it is offered a delegating tool of its own (a nested tree), hands its question on the same way and answers
    with what came back. A run's cap under delegation is then read off its calls: whose it counts, each child's own
    cap, what the parent sees at it."""

    at_once: int = 1

    def __call__(self, conv: Conversation) -> Decision:
        child = QUESTION.search(conv.task) is not None  # a child: its task is its parent's question
        if back := [r for r in conv.results if r.call.name == conv.delegate]:
            said = " | ".join(f"{'an error: ' if r.is_error else ''}{r.content}" for r in back)
            return Decision(answer=f"{PARENT_SAW}{said}")
        if child and (conv.delegate is None or conv.results):  # it hands its question on first thing, or never
            return NeverStops()(conv)
        if conv.delegate is None:
            return Decision(answer="no delegating tool was offered")
        delegate = conv.delegate
        if child:
            return Decision((Call(delegate, conv.delegate_args(conv.task)),))
        asked = [PROBE_FUNCTION] if self.at_once == 1 else [f"{PROBE_FUNCTION}_{n}" for n in range(1, self.at_once + 1)]
        return Decision(tuple(Call(delegate, conv.delegate_args(Delegate.question(f))) for f in asked))


def policy_named(spec: str) -> Callable[[Conversation], Decision]:
    """A policy from its command-line spelling: `investigator`, `never-stops`, `answers-on:K`, `ends-by-tool-on:K`
    or `delegates-to-never-stops[:K]` (K questions in one reply)."""
    from looplab.scenarios.scripted.policy import Investigator

    name, _, arg = spec.partition(":")
    if name == "investigator" and not arg:
        return Investigator().decide
    if name == "never-stops" and not arg:
        return NeverStops()
    if name == "answers-on" and arg.isdigit() and int(arg) >= 1:
        return AnswersOnCall(int(arg))
    if name == "ends-by-tool-on" and arg.isdigit() and int(arg) >= 1:
        return EndsByToolOnCall(int(arg))
    if name == "delegates-to-never-stops" and (not arg or (arg.isdigit() and int(arg) >= 1)):
        return DelegatesToOneThatNeverStops(int(arg or 1))
    known = "investigator, never-stops, answers-on:K, ends-by-tool-on:K or delegates-to-never-stops[:K]"
    raise ValueError(f"unknown policy {spec!r}; use {known}")
