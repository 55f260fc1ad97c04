"""Probe policies: scripted models that exercise a loop's cap rather than investigate.

`NeverStops` asks for a fresh tool call every turn (never the same one twice,
so repetition detection stays out of the way); `AnswersOnCall(k)` does the
same and answers on its k-th model call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from looplab.scenarios.scripted.conversation import Conversation
from looplab.scenarios.scripted.policy import Call, Decision

__all__ = ["AnswersOnCall", "NeverStops", "policy_named"]


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


def policy_named(spec: str) -> Callable[[Conversation], Decision]:
    """A policy from its command-line spelling: `investigator`, `never-stops` or `answers-on:K`."""
    from looplab.scenarios.scripted.policy import Investigator

    name, _, arg = spec.partition(":")
    if name == "investigator" and not arg:
        return Investigator().decide
    if name == "never-stops" and not arg:
        return NeverStops()
    if name == "answers-on" and arg.isdigit() and int(arg) >= 1:
        return AnswersOnCall(int(arg))
    raise ValueError(f"unknown policy {spec!r}; use investigator, never-stops or answers-on:K")
