"""The agents of a run: the one every runner starts, and the second one a case may let it hand work to."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Delegate", "MAIN_AGENT", "OFFERED", "QUESTION", "not_delegating"]

#: What the record calls the agent a runner starts, once a run has more than one.
MAIN_AGENT = "investigator"

#: The ways a run's agents may be arranged beyond one parent asking one child at a time: `parallel`, a parent
#: asking several children in one reply (its framework runs them side by side or in turn, its own way); `nested`,
#: a child that hands its question on to an agent of its own.
SHAPES = ("parallel", "nested")


class Delegate(BaseModel):
    """A second agent the run's agent may hand a sub-question to, with the framework's own way of delegating.

    Every runner that can delegate builds it with the same `name` (its tool or handoff is named after it), tells
    its parent what it does with `description`, and starts it with `instructions` as its system prompt and the
    run's tools; its model calls pass the run's one boundary, so the run's limits hold for both agents. A nested
    tree gives it a `delegate` of its own, which it is offered the same way its parent is offered it.
    """

    model_config = ConfigDict(frozen=True)

    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,40}$", description="The agent's name, as tools and handoffs take it.")
    description: str = Field(min_length=1, description="What its parent is told it does.")
    instructions: str = Field(min_length=1, description="Its system prompt.")
    delegate: Delegate | None = Field(
        None, description="The agent it may hand its own question to in turn (a nested tree), built the same way."
    )

    @property
    def tree(self) -> list[Delegate]:
        """It and every agent below it, top down: the agents a run with it as the delegate may start."""
        below = self.delegate.tree if self.delegate is not None else []
        return [self, *below]

    @property
    def marker(self) -> bytes:
        """What a request of this agent's carries and no other request does: its instructions' first line, as a
        JSON string holds it (the recorder tells the agents apart by it)."""
        first = next(line for line in self.instructions.splitlines() if line.strip())
        return json.dumps(first.strip())[1:-1].encode()

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON Schema of the tool that asks it (where a framework lets the adapter write it): one question."""
        question = {"type": "string", "description": "What to find out, e.g. where a function is defined."}
        return {"type": "object", "properties": {"question": question}, "required": ["question"]}

    def question_in(self, args: Any) -> str:
        """The question a call of the delegating tool carries (`parameters`), from its arguments as the model sent
        them (an object, or its JSON text); a `ValueError` saying what is wrong, for the model to read, otherwise."""
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                args = None
        question = args.get("question") if isinstance(args, dict) else None
        if not isinstance(question, str):
            raise ValueError(f"InvalidArguments: {self.name} takes a 'question' string")
        return question

    @staticmethod
    def question(function: str) -> str:
        """The sub-question a parent hands it: where `function` is defined, and its source."""
        return f"Find where `{function}` is defined and read it; answer with its file and that file's text."


#: How the scripted model recognises that question in a child's task (`Delegate.question`'s wording).
QUESTION = re.compile(r"Find where `(?P<name>\w+)` is defined")
#: How the scripted model recognises a tool (or handoff) that hands work to such an agent: its description says so.
OFFERED = re.compile(r"where a function is defined", re.I)


def not_delegating(delegation: str | None, gaps: Mapping[str, str], shape: str | None) -> str | None:
    """Why a runner whose declaration says `delegation` and `delegation_gaps` (`gaps`) runs no delegation case of
    `shape` (one of `SHAPES`; None: one child at a time), in one line; None when it runs it."""
    if delegation is None:
        return "cannot delegate"
    if shape is not None and (why := gaps.get(shape)):
        return f"no {shape} delegation: {why}"
    return None
