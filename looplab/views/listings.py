"""The listings: every runner looplab knows and every case of a suite, as terminal tables."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from rich.console import Console
from rich.text import Text

from looplab.views.terminal import Col, print_table

if TYPE_CHECKING:
    from looplab.adapters.contract.declaration import Declaration
    from looplab.scenarios.cases import Case

__all__ = ["cases_table", "runners_table"]


def runners_table(runners: Iterable[Declaration], *, out: Console | None = None) -> None:
    """Every runner: whether it is installed, the extra that enables it, what it runs."""
    rows = []
    for info in runners:
        if info.installed():
            state = Text("installed", style="green")
        else:  # one that cannot share this environment is created for it by --isolate
            state = Text("missing", style="yellow") if info.in_all else Text("own env", style="cyan")
        extra = info.extra + (f" + {info.programs}" if info.programs else "")
        rows.append([info.name, state, extra, info.summary])
    cols = (Col("runner"), Col("state"), Col("extra", prose=True), Col("what it runs", prose=True, fold="line"))
    notes = [
        "enable one with pip install 'looplab[EXTRA]' (and what pip cannot install, where named); "
        "'own env': its framework cannot share this environment, and --isolate creates one for it"
    ]
    print_table("runners", cols, rows, notes, out=out)


def cases_table(cases: Iterable[Case], *, out: Console | None = None) -> None:
    """Every case: its persona, its max_steps and what it shows; and, where a case offers tools of its own suite or
    runs another test command, those."""
    cases = list(cases)
    own = any(c.own_tools or c.test_command for c in cases)
    rows = [
        [
            c.id if c.by_default else f"{c.id} (only when named)",
            c.model.persona,
            str(c.limits.max_steps),
            *([", ".join(c.own_tools) or "-", " ".join(c.test_command or ["pytest"])] if own else []),
            c.description,
        ]
        for c in cases
    ]
    cols = (
        Col("case"),
        Col("persona"),
        Col("max_steps", right=True),
        *((Col("own tools", prose=True), Col("tests run by", prose=True)) if own else ()),
        Col("what it shows", prose=True, fold="line"),
    )
    print_table("cases", cols, rows, out=out)
