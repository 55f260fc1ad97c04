"""What a behaviour scorecard holds: its rows (the behaviours, in groups of columns), and per runner a card with a
cell per row, each cell what was seen and where it was read."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel

NOT_MEASURED = "not measured"


class Cell(BaseModel):
    """One behaviour of one runner: what was seen, and where (None: not measured)."""

    text: str
    evidence: str | None = None
    #: The anchor of the runner's section in the caps doc, for cells read from it.
    caps_section: str | None = None

    @property
    def measured(self) -> bool:
        """Whether the cell was read off a measurement (one that was not says "not measured")."""
        return self.evidence is not None


@dataclass(frozen=True)
class Row:
    """A behaviour the scorecard shows: its key, its heading, and the group of columns it belongs to."""

    key: str
    title: str
    group: str


ROWS = (
    Row("default_cap", "default cap", "the cap"),
    Row("at_cap", "at the cap", "the cap"),
    Row("history", "partial history at the cap", "the cap"),
    Row("last_tools", "tools of the last call", "the cap"),
    Row("streamed_cap", "at the cap, streamed", "the cap"),
    Row("malformed", "malformed arguments", "bad calls"),
    Row("unknown_tool", "unknown tool", "bad calls"),
    Row("parallel", "two tools in one reply", "bad calls"),
    Row("guards", "repetition / approval", "bad calls"),
    Row("token_budget", "token budget (max_tokens)", "budgets"),
    Row("delegation", "delegation (one budget for both agents)", "budgets"),
    Row("delegation_parallel", "two delegates asked in one reply", "agent trees"),
    Row("delegation_nested", "a delegate that delegates (three levels)", "agent trees"),
    Row("delegated_cap", "the framework's cap under delegation", "budgets"),
    Row("parallel_cap", "its cap, two children at once", "agent trees"),
    Row("nested_cap", "its cap, three levels deep", "agent trees"),
    Row("child_default", "a child left at its default", "agent trees"),
    Row("native_tokens", "the framework's own token budget", "budgets"),
    Row("first_request", "first request", "cost"),
    Row("turn_overhead", "per-turn overhead", "cost"),
    Row("import_time", "import time", "cost"),
    Row("apis", "wire APIs", "cost"),
    Row("own_cases", "passed, median model calls", "your cases"),
)
GROUPS = tuple(dict.fromkeys(r.group for r in ROWS))


class RunnerCard(BaseModel):
    """One runner's row: its version and a cell per behaviour (`ROWS` keys)."""

    runner: str
    version: str
    cells: dict[str, Cell]


class Scorecard(BaseModel):
    """Every runner's card, and the sources the cells were read from."""

    cards: list[RunnerCard]
    sources: dict[str, str]


#: Where each group's cells come from, for the legend under its table.
GROUP_SOURCES = {
    "the cap": "caps",
    "bad calls": "eval: sloppy-calls, parallel-reads, silent-read, injected-instruction",
    "budgets": "eval: token-budget, delegation; runner declarations (which can delegate)",
    "agent trees": "eval: delegation-parallel, delegation-nested; caps (under delegation); runner declarations "
    "(which shapes each can express)",
    "cost": "eval: vip-compound (first request); bench (overhead, import); registry (APIs)",
    "your cases": "eval: the cases outside looplab's own suite",
}


def group_rows(group: str) -> list[Row]:
    """The rows of `group`, in the scorecard's order."""
    return [r for r in ROWS if r.group == group]


def groups_of(card: Scorecard) -> list[str]:
    """The groups worth showing: every one, but "your cases" only when some runner has run a team's case."""
    own = any(c.cells["own_cases"].measured for c in card.cards)
    return [g for g in GROUPS if g != "your cases" or own]
