"""Probe policies: scripted models that exercise a loop's cap rather than investigate.

`NeverStops` asks for a fresh tool call every turn (never the same one twice,
so repetition detection stays out of the way); `AnswersOnCall(k)` does the
same and answers on its k-th model call; `DelegatesToOneThatNeverStops` hands one
question to the agent its delegating tool starts, which never stops, and answers
with what came back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from looplab.adapters.contract.agents import QUESTION, Delegate
from looplab.scenarios.scripted.conversation import Conversation
from looplab.scenarios.scripted.policy import Call, Decision

__all__ = ["AnswersOnCall", "DelegatesToOneThatNeverStops", "NeverStops", "PARENT_SAW", "policy_named"]

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


@dataclass(frozen=True)
class DelegatesToOneThatNeverStops:
    """The parent hands one question to its delegating tool and answers with what came back (`PARENT_SAW`, then
    the result, marked when it was an error); the agent that question starts never stops. A run's cap under
    delegation is then read off its calls: whose it counts, the child's own cap, what the parent sees at it."""

    def __call__(self, conv: Conversation) -> Decision:
        if QUESTION.search(conv.task):  # the child: its task is the parent's question
            return NeverStops()(conv)
        if back := [r for r in conv.results if r.call.name == conv.delegate]:
            error = "an error: " if back[-1].is_error else ""
            return Decision(answer=f"{PARENT_SAW}{error}{back[-1].content}")
        if conv.delegate is None:
            return Decision(answer="no delegating tool was offered")
        question = Delegate.question(PROBE_FUNCTION)
        return Decision((Call(conv.delegate, conv.delegate_args(question)),))


def policy_named(spec: str) -> Callable[[Conversation], Decision]:
    """A policy from its command-line spelling: `investigator`, `never-stops`, `answers-on:K` or
    `delegates-to-never-stops`."""
    from looplab.scenarios.scripted.policy import Investigator

    name, _, arg = spec.partition(":")
    if name == "investigator" and not arg:
        return Investigator().decide
    if name == "never-stops" and not arg:
        return NeverStops()
    if name == "answers-on" and arg.isdigit() and int(arg) >= 1:
        return AnswersOnCall(int(arg))
    if name == "delegates-to-never-stops" and not arg:
        return DelegatesToOneThatNeverStops()
    known = "investigator, never-stops, answers-on:K or delegates-to-never-stops"
    raise ValueError(f"unknown policy {spec!r}; use {known}")
