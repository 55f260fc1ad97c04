"""What the scripted model's turns are made of, and how they go wrong: the tool calls and answers the investigator
decides (`Call`, `Decision`), the `sloppy` persona's mistakes (`MISTAKES`) and the `noisy` persona's dice (`slip`),
which know nothing of the investigation: each is made of the call the model meant."""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from looplab.scenarios.scripted.conversation import Conversation

#: How a noisy model's turn goes wrong: a malformed call (one of `MISTAKES`), a read of the wrong file, or an answer
#: given before the cause is found.
Slip = Literal["malformed", "wrong_read", "premature"]
#: The chance of each slip at each turn of a noisy model that calls a tool; the rest of the time it plays careful.
#: Chosen for a pass rate near 60 % on the noisy-model case (vip-compound's checks), well inside (0, 1) at 20 repeats:
#: its four tool turns all go clean with (1 - 0.20)^4 = 41 %, and one slip that costs only a turn still passes within
#: the case's six model calls (a wrong read always; a malformed call where the framework hands the error back, as the
#: handrolled loop does, not where it ends the run, as LangGraph does on some); a premature answer or a second slip
#: fails. That makes about 64 % at most; measured over 200 seeds, 59 % (handrolled) and 56 % (LangGraph), and 11 of
#: 20 for both at `--repeat 20`. Each slip is likely enough to occur within 20 repeats.
SLIPS: dict[Slip, float] = {"malformed": 0.07, "wrong_read": 0.07, "premature": 0.06}


@dataclass(frozen=True)
class Call:
    """A tool the policy asks for; `args` is a JSON text only when a sloppy model botches it."""

    name: str
    args: dict[str, Any] | str


@dataclass(frozen=True)
class Decision:
    """Either tool calls (one turn may hold several) or a final answer."""

    calls: tuple[Call, ...] = ()
    answer: str | None = None


def _mistakes() -> list[Callable[[Call], Call]]:
    """What a sloppy model does to the call it meant, one mistake per turn, then it behaves."""

    def first(call: Call) -> tuple[str, Any]:
        args = call.args if isinstance(call.args, dict) and call.args else {"arg": ""}
        return next(iter(args.items()))

    return [
        lambda c: Call(c.name, '{"' + first(c)[0] + '": ' + str(first(c)[1]) + "}"),  # not JSON: value unquoted
        lambda c: Call(c.name, {first(c)[0]: 42}),  # a number where a string belongs
        lambda c: Call("run_shell", {"command": f"{c.name} {first(c)[1]}"}),  # a tool that does not exist
        lambda c: Call(c.name, {}),  # the required argument left out
    ]


MISTAKES = _mistakes()


def slip(conv: Conversation) -> Slip | None:
    """How a noisy model's turn in `conv` goes wrong, if it does: the roll of dice seeded by the conversation's
    `seed`, its agent (the task) and the turn, so asking again (a retried request, another run with the seed) rolls
    the same, while each turn, agent and seed rolls its own."""
    return slip_of(dice_of(conv))


def dice_of(conv: Conversation) -> random.Random:
    agent = hashlib.sha256(conv.task.encode("utf-8", "surrogatepass")).hexdigest()
    return random.Random(f"{conv.seed}\n{agent}\n{conv.assistant_turns}")  # a str seed: the same in every process


def slip_of(dice: random.Random) -> Slip | None:
    roll = dice.random()
    for kind, chance in SLIPS.items():
        if roll < chance:
            return kind
        roll -= chance
    return None


def elsewhere(call: Call) -> str | None:
    """The file a hasty model reads instead of doing `call`: the file `call` is after (the file read, the test's file,
    a module named after the function searched for) one folder up, or in `src/` if it is at the top; None for a call
    that is after no file."""
    first = str(next(iter(call.args.values()), "")) if isinstance(call.args, dict) else ""
    if call.name == "run_tests":
        file = first.split("::")[0]
    elif call.name == "search_code":
        file = f"{words[-1]}.py" if (words := re.findall(r"\w+", first)) else ""
    else:
        file = first if call.name == "read_file" else ""
    folder, _, name = file.rpartition("/")
    if not name:
        return None
    return f"{folder.rpartition('/')[0]}/{name}".lstrip("/") if folder else f"src/{name}"
