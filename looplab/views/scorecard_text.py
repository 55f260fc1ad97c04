"""The behaviour scorecard shown: one terminal table per group of behaviours, and the Markdown tables whose cap
cells link to the caps doc."""

from __future__ import annotations

from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from looplab.views import markdown as md
from looplab.views import terminal
from looplab.views.scorecard_rows import GROUP_SOURCES, ROWS, Row, Scorecard, group_rows, groups_of

__all__ = ["markdown", "print_terminal"]


def print_terminal(card: Scorecard, console: Console | None = None) -> None:
    """One table per group of behaviours, each fitting the terminal (cells wrap at their words; nothing is cut)."""
    out = console or terminal.console()
    shared_keys = {r.key for r in ROWS if len(card.cards) > 1 and len({c.cells[r.key].text for c in card.cards}) == 1}
    if all(r.key in shared_keys for g in groups_of(card) for r in group_rows(g)):
        # No table will name the runners, so "every runner" says whom it means here.
        names = Text.assemble(("every runner: ", "dim"), ", ".join(c.runner for c in card.cards))
        for line in _hanging(names, 0, out.width, out):
            out.print(line, overflow="fold")
    for group in groups_of(card):
        rows = group_rows(group)
        # A behaviour every runner shares is said once, above the group, not in a column of the same words.
        shared = [r for r in rows if r.key in shared_keys]
        rest = [r for r in rows if r not in shared]
        cols = [terminal.Col("runner"), *(terminal.Col(r.title, prose=True) for r in rest)]
        cells = [[c.runner, *(c.cells[r.key].text for r in rest)] for c in card.cards]
        notes = [f"from {GROUP_SOURCES[group]}"]
        head = terminal.wrap_text(Text(f"scorecard: {group}", style="bold"), out.width, out)
        for r in shared:
            said = Text.assemble(("every runner: ", "dim"), f"{r.title}: {card.cards[0].cells[r.key].text}")
            head += _hanging(said, 0, out.width, out)
        table = terminal.tabular_lines("", cols, cells, notes, width=out.width, out=out) if rest else None
        body = table if table is not None else _narrow_lines(rest, card, out) if rest else []
        out.print()  # a blank line sets each group apart
        for line in head + body + ([] if table is not None else terminal.wrap_text(Text(notes[0]), out.width, out)):
            out.print(line, overflow="fold")
    for name, source in card.sources.items():
        out.print(f"[dim]{name}: {source}[/dim]")


def _narrow_lines(rows: list[Row], card: Scorecard, out: Console) -> list[Text]:
    """Rows too wide for a table: per runner one line a behaviour (wrapped, its continuation indented, only when
    the line cannot hold it)."""
    lines: list[Text] = []
    for c in card.cards:
        lines += terminal.wrap_text(Text(c.runner, style="bold"), out.width, out)
        for r in rows:
            cell = c.cells[r.key].text
            if cell_len(f"  {r.title}: {cell}") > out.width >= cell_len(cell) + 4:
                # The cell whole on a line of its own, under its behaviour, rather than broken after the title.
                lines += [Text(f"  {r.title}:", style="dim"), Text(f"    {cell}")]
                continue
            lines += _hanging(Text.assemble((f"{r.title}: ", "dim"), cell), 2, out.width, out)
    return lines


def _hanging(text: Text, indent: int, width: int, out: Console) -> list[Text]:
    """`text` at `indent`, its continuation lines two further in."""
    room = max(width - indent, 1)
    first = terminal.wrap_text(text, room, out)[0]
    lines = [Text(" " * indent) + first]
    rest = text[len(first.plain) :]
    rest = rest[len(rest.plain) - len(rest.plain.lstrip()) :]
    if rest.plain:
        more = min(indent + 2, width - 1)
        lines += [Text(" " * more) + line for line in terminal.wrap_text(rest, max(width - more, 1), out)]
    return lines


def markdown(card: Scorecard, caps_doc: str = "iteration-caps.md") -> str:
    """The scorecard as Markdown tables; each cap cell links to its runner's section of the caps doc. Every cell,
    runner and source is read from a measurement (the site shows kept ones): each is inert Markdown."""
    out = ["# Behaviour scorecard, measured", ""]
    out += [f"- {md.text(k)}: {md.text(v)}" for k, v in card.sources.items()]
    for group in groups_of(card):
        rows = group_rows(group)
        out += ["", f"## {group}", "", f"From {GROUP_SOURCES[group]}.", ""]
        out += ["| runner | " + " | ".join(r.title for r in rows) + " |", "|---" * (len(rows) + 1) + "|"]
        for c in card.cards:
            cells = []
            for r in rows:
                found = c.cells[r.key]
                text = md.text(found.text)
                if found.caps_section:  # `caps_anchor` keeps letters, digits, `-` and `_`: the anchor as it is
                    text = f"[{text}]({caps_doc}#{found.caps_section})"
                cells.append(text)
            out.append(f"| {md.code(c.runner)} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"
