"""What a real model would cost before it costs: `looplab eval --cases DIR --model PROVIDER:NAME --estimate`.

The matrix runs against the scripted model, offline, wherever the scripted model can play the case; each cell's
tokens are then priced at the named model's price (`--price`, else the shipped table). No request reaches the
provider. A case that offers tools the scripted model does not drive cannot run that way: for it the estimate
gives the bound its limits set instead (`max_steps` model calls a run, and `max_cost_usd` where set).
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.cells import cell_len

from looplab.adapters.contract.model import parse_model
from looplab.adapters.contract.pricing import Pricing, format_cost, price_of, price_table, total_cost
from looplab.records.outcome import RunOutcome
from looplab.run import harness
from looplab.run.environments import RunnerEnv
from looplab.run.matrix import run_matrix
from looplab.scenarios.cases import Case
from looplab.views.eval_tables import SHORT_STOP
from looplab.views.render import TOKENS_IN, TOKENS_OUT
from looplab.views.terminal import Col, table_lines

__all__ = ["estimate", "render"]

#: The columns `render` lays its table out in unless told otherwise.
WIDTH = 100

#: What the token counts are: the scripted model's own (scenarios/scripted/wire.py), not a real tokenizer's.
TOKENS_NOTE = (
    "Tokens are as the scripted model counts them: about one input token per four bytes of each request's whole "
    "body (system prompt, conversation and tool schemas, as JSON), and one output token per four characters of "
    "its answer or call arguments plus four per call. A real model's tokenizer counts differently, and its "
    "answers differ in length and number: take these as the order of the cost, not the bill."
)


@dataclass(frozen=True)
class Bound:
    """What a case's limits allow a run the scripted model could not make."""

    #: The tools the case offers that the scripted model does not drive (why it did not run).
    tools: tuple[str, ...]
    max_steps: int
    max_cost_usd: float | None
    #: The case's token budget: input plus output over the run's calls, but for the last call's reply.
    max_tokens: int | None = None


@dataclass(frozen=True)
class Cell:
    """One runner on one case: the tokens its scripted run used and their cost, or why there is none."""

    runner: str
    case: str
    #: How the scripted run ended; "" when it did not run.
    stop: str = ""
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    #: Dollars at the named model's price; None when that price is unknown or the cell was not measured.
    cost_usd: float | None = None
    #: Not run because the scripted model cannot play the case: the limits' bound instead.
    bound: Bound | None = None
    #: Not run for another reason (a runner that cannot start here): the one-line reason.
    error: str | None = None

    @property
    def measured(self) -> bool:
        """Whether a scripted run gave this cell's tokens."""
        return self.bound is None and self.error is None


@dataclass(frozen=True)
class Estimate:
    """The cells of a matrix priced at one model's price, and their totals."""

    model: str
    #: The price used; None when neither `--price` nor the shipped table gives one.
    pricing: Pricing | None
    #: Where the price came from, for people ("--price", "the price table taken 2025-..."); "" when unknown.
    price_source: str
    cells: tuple[Cell, ...]
    #: How many times the matrix would run (`--repeat`, or `--repeat-until`'s most): the cells ran once.
    repeats: int = 1

    @property
    def measured(self) -> list[Cell]:
        """The cells a scripted run measured."""
        return [c for c in self.cells if c.measured]

    @property
    def model_calls(self) -> int:
        return sum(c.model_calls for c in self.measured)

    @property
    def input_tokens(self) -> int:
        return sum(c.input_tokens for c in self.measured)

    @property
    def output_tokens(self) -> int:
        return sum(c.output_tokens for c in self.measured)

    @property
    def cost_usd(self) -> float | None:
        """The measured cells' cost; None when the price is unknown."""
        return None if self.pricing is None else total_cost(c.cost_usd for c in self.measured)

    @property
    def bounded(self) -> list[Cell]:
        """The cells the scripted model could not play, each with its case's bound."""
        return [c for c in self.cells if c.bound is not None]

    @property
    def bound_calls(self) -> int:
        """The most model calls the bounded cells may make together."""
        return sum(c.bound.max_steps for c in self.bounded if c.bound is not None)

    @property
    def bound_cost_usd(self) -> float | None:
        """The most the bounded cells may spend together; None when one of them has no dollar budget."""
        budgets = [c.bound.max_cost_usd for c in self.bounded if c.bound is not None]
        return total_cost(budgets)


def estimate(
    cases: Sequence[Case],
    runners: Sequence[str],
    model: str,
    pricing: Pricing | None,
    *,
    jobs: int,
    isolated: Callable[[str], RunnerEnv] | None = None,
    sandbox: bool = False,
    repeats: int = 1,
) -> Estimate:
    """Run `runners` x `cases` against the scripted model and price each cell at `model`'s price.

    `model` is `provider:name`; `pricing` (`--price`) overrides the shipped table's price. Nothing is sent to
    the provider. A case the scripted model cannot play is not run: its cells carry the bound of its limits.
    `jobs` and `isolated` are as for `looplab.run.matrix.run_matrix`; `sandbox` as for `looplab.run.harness.run_one`.
    `repeats`: the times the matrix would run; each cell runs once here and is counted that many times.
    """
    provider, name = parse_model(model)
    price = pricing or price_of(provider, name)
    source = "--price" if pricing else f"the price table taken {price_table().taken}" if price else ""
    playable = [c for c in cases if not c.tools_beyond_scripted]
    outcomes: list[RunOutcome] = []
    if playable and runners:
        with harness.endpoint(harness.ModelChoice()) as where:
            extra = {"sandbox": True} if sandbox else {}
            outcomes = run_matrix(list(runners), playable, where, jobs=jobs, isolated=isolated, **extra)
    by_cell = {(o.runner, o.case): o for o in outcomes}
    cells = []
    for case in cases:
        missing = tuple(case.tools_beyond_scripted)
        for runner in runners:
            if missing:
                bound = Bound(missing, case.limits.max_steps, case.limits.max_cost_usd, case.limits.max_tokens)
                cells.append(Cell(runner, case.id, bound=bound))
            else:
                cells.append(_priced(by_cell[runner, case.id], price))
    return Estimate(model, price, source, tuple(cells), repeats)


def _priced(outcome: RunOutcome, price: Pricing | None) -> Cell:
    if outcome.result is None:
        return Cell(outcome.runner, outcome.case, error=outcome.error or "not run")
    r, t = outcome.result, outcome.result.totals
    # The scripted run's own cost is at the scripted model's price (free, or the case's [model] price): not this one.
    cost = None if price is None else price.cost(t.input_tokens, t.output_tokens, t.cached_input_tokens)
    return Cell(
        outcome.runner,
        outcome.case,
        stop=str(r.stop_reason),
        model_calls=t.model_calls,
        input_tokens=t.input_tokens,
        output_tokens=t.output_tokens,
        cached_input_tokens=t.cached_input_tokens,
        cost_usd=cost,
    )


_COLUMNS = (
    Col("runner"),
    Col("case"),
    Col("scripted run"),
    Col("calls", right=True),
    TOKENS_IN,
    TOKENS_OUT,
    Col("cost $", right=True),
)
#: What a cell that did not run shows in the "scripted run" column.
NOT_RUN = "not run"


def _row(cell: Cell, priced: bool) -> list[str]:
    if cell.bound is not None:
        budget = cell.bound.max_cost_usd
        cost = f"≤ {_dollars(budget)}" if budget is not None else "no bound"
        return [cell.runner, cell.case, NOT_RUN, f"≤ {cell.bound.max_steps}", "—", "—", cost]
    if cell.error is not None:
        return [cell.runner, cell.case, NOT_RUN, "—", "—", "—", "—"]
    cost = format_cost(cell.cost_usd) if priced else "unknown"
    return [
        cell.runner,
        cell.case,
        cell.stop,
        str(cell.model_calls),
        f"{cell.input_tokens:,}",
        f"{cell.output_tokens:,}",
        cost,
    ]


def _dollars(amount: float) -> str:
    """A budget as people write it: cents where it has no finer part (0.50), else as given (0.005)."""
    return f"{amount:.2f}" if round(amount, 2) == amount else f"{amount:g}"


def _price_text(est: Estimate) -> str:
    p = est.pricing
    if p is None:
        return "price unknown"
    return f"${p.input_per_mtok:g} in, ${p.output_per_mtok:g} out per million tokens ({est.price_source})"


def _narrowest(cols: Sequence[Col], rows: Sequence[Sequence[str]]) -> int:
    """The fewest columns the rows take on one line each: every cell whole, one space between columns, headers
    broken at their spaces (a header may take two lines; a cell never does)."""
    widths = [
        max([max(cell_len(w) for w in (c.short or c.header).split()), *(cell_len(r[i]) for r in rows)])
        for i, c in enumerate(cols)
    ]
    return sum(widths) + len(widths) - 1


def _layout(cols: list[Col], rows: list[list[str]], total: list[str], width: int) -> _Shape:
    """The columns, rows and total row that hold one cell a line in `width`, with the header lines for what the
    layout took out of the table (a column every cell shares, the stops spelt short)."""
    head: list[str] = []
    shared: list[str] = []
    # A column where every cell says the same says it once, above the table (the runner column stays: it names
    # each row, and the total's).
    for name in ("case", "scripted run"):
        i = [c.header for c in cols].index(name)
        values = {r[i] for r in rows}
        if len(values) == 1:
            shared.append(f"{name} {values.pop()}")
            if total[i]:  # the total's count of cells run moves beside its label
                total = [f"{total[0]}, {total[i]}", *total[1:]]
            cols, rows, total = _without(i, cols, rows, total)
    if shared:
        head.append("every cell: " + " · ".join(shared))
    # The first that fits: as it is, the stops spelt short, each case a line of its own, or both.
    shapes = [(False, False), (True, False), (False, True), (True, True)]
    for short, grouped in shapes:
        shaped: _Shape = (cols, rows, total, [])
        if short:
            shaped = _short_stops(*shaped)
        if grouped:
            shaped = _by_case(*shaped)
        if _narrowest(shaped[0], [*shaped[1], shaped[2]]) <= width:
            break
    return shaped[0], shaped[1], shaped[2], head + shaped[3]


_Shape = tuple[list[Col], list[list[str]], list[str], list[str]]


def _short_stops(cols: list[Col], rows: list[list[str]], total: list[str], head: list[str]) -> _Shape:
    """The "scripted run" column as "ended", its stops spelt as the matrix spells them, a line above saying so."""
    if "scripted run" not in [c.header for c in cols]:
        return cols, rows, total, head
    i = [c.header for c in cols].index("scripted run")
    used = sorted({r[i] for r in rows} - {NOT_RUN})
    rows = [[*r[:i], SHORT_STOP.get(r[i], r[i]), *r[i + 1 :]] for r in rows]
    short = [f"{SHORT_STOP[s]} = {s}" for s in used if SHORT_STOP.get(s, s) != s]
    said = "ended: how the scripted run stopped" + (f" ({', '.join(short)})" if short else "")
    return [*cols[:i], Col("ended"), *cols[i + 1 :]], rows, total, [*head, said]


def _by_case(cols: list[Col], rows: list[list[str]], total: list[str], head: list[str]) -> _Shape:
    """No case column: each case a line of its own, its runners' rows indented under it (the cells come case by
    case)."""
    if "case" not in [c.header for c in cols]:
        return cols, rows, total, head
    i = [c.header for c in cols].index("case")
    grouped: list[list[str]] = []
    last = None
    for row in rows:
        if row[i] != last:
            last = row[i]
            grouped.append([last + ":", *[""] * (len(cols) - 2)])
        grouped.append(["  " + row[0], *row[1:i], *row[i + 1 :]])
    total = [f"{total[0]}, {total[i]}", *total[1:i], *total[i + 1 :]]
    return [Col("case: runner"), *cols[1:i], *cols[i + 1 :]], grouped, total, head


def _without(
    i: int, cols: list[Col], rows: list[list[str]], total: list[str]
) -> tuple[list[Col], list[list[str]], list[str]]:
    """The table without its column `i`."""
    return cols[:i] + cols[i + 1 :], [r[:i] + r[i + 1 :] for r in rows], total[:i] + total[i + 1 :]


def render(est: Estimate, *, width: int = WIDTH) -> str:
    """The estimate as plain text, no line wider than `width` and each cell on one line: the model and its price,
    what every cell shares, a table of the cells and the total, then what the numbers mean."""
    priced = est.pricing is not None
    rows = [_row(c, priced) for c in est.cells]
    n = len(est.measured)
    total_cost_text = format_cost(est.cost_usd) if priced else "unknown"
    total = [
        "total",
        f"{n} cell{'s' * (n != 1)} run",
        "",
        str(est.model_calls),
        f"{est.input_tokens:,}",
        f"{est.output_tokens:,}",
        total_cost_text,
    ]
    cols, table = list(_COLUMNS), rows
    if not priced:  # a cost column of "unknown" says nothing the price line does not
        cols, table, total = _without(len(cols) - 1, cols, table, total)
    cols, rows, total, head = _layout(cols, table, total, width)
    notes = [TOKENS_NOTE, "No request was sent to the provider."]
    if not priced:
        notes.append(
            f"No price is known for {est.model}: the tokens are shown without a cost; "
            "give --price IN,OUT (dollars per million tokens) to price them."
        )
    notes += _repeat_notes(est)
    notes += _bound_notes(est)
    notes += [f"{c.runner} on {c.case}: not run: {c.error}" for c in est.cells if c.error is not None]
    title = f"looplab eval --estimate · {est.model}"
    lines = table_lines("", cols, [*rows, total], notes, width=width)
    top = [title, f"at {_price_text(est)}" if priced else "price unknown: the tokens without a cost", *head]
    wrapped = [w for line in top for w in textwrap.wrap(line, width, break_on_hyphens=False) or [""]]
    return "\n".join([*wrapped, *(line.plain.rstrip() for line in lines)])


def _repeat_notes(est: Estimate) -> list[str]:
    """With repeats: what the matrix costs that many times over (each cell ran once here)."""
    if est.repeats <= 1:
        return []
    k = est.repeats
    cost = f", ${format_cost(est.cost_usd * k)}" if est.cost_usd is not None else ""
    bound = f"; the cells not run at most {est.bound_calls * k} model calls" if est.bounded else ""
    return [
        f"× {k} repeats: about {est.model_calls * k:,} model calls, {(est.input_tokens + est.output_tokens) * k:,} "
        f"tokens{cost}{bound}. Each cell ran once here: a model that varies run to run varies these too."
    ]


def _bound_notes(est: Estimate) -> list[str]:
    """Per case the scripted model could not play: why, and what its limits allow; then the bounds together."""
    notes, seen = [], set()
    for cell in est.bounded:
        if cell.case in seen or cell.bound is None:
            continue
        seen.add(cell.case)
        b = cell.bound
        bounds = [f"${_dollars(b.max_cost_usd)}"] if b.max_cost_usd is not None else []
        bounds += [f"{b.max_tokens:,} tokens and the last call's reply"] if b.max_tokens is not None else []
        spend = (
            f"and at most {' and '.join(bounds)}"
            if bounds
            else "and, with neither max_cost_usd nor max_tokens, no bound on its tokens or cost"
        )
        notes.append(
            f"{cell.case}: not run, since it offers {', '.join(b.tools)}, which the scripted model does not drive; "
            f"its limits allow each run at most {b.max_steps} model calls {spend}."
        )
    if est.bounded:
        cost = est.bound_cost_usd
        spend = f"at most ${_dollars(cost)}" if cost is not None else "no bound on cost (a case without max_cost_usd)"
        notes.append(
            f"The {len(est.bounded)} cells not run may make at most {est.bound_calls} model calls together, "
            f"with {spend}."
        )
    return notes
