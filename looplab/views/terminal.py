"""The terminal: the one console looplab prints to, and text and tables laid out for its width.

Every table is laid out for the console's width by `print_table`: on a wide terminal each row is one
line with every column in it; where that does not fit, the table tries in turn to move its long
columns out of the row (prose onto a line of its own under the row, a short value under the row's
first cell), to wrap its headers at their spaces, and to print short headers explained by a legend
under the table. A table that fits none of those prints each row as a block of `header: value`
text. No cell or header is ever cut: text wraps at its words, and a word wider than the whole
terminal folds.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Literal

from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

__all__ = ["Col", "Value", "console", "markdown_lines", "print_table", "table_lines", "wrap_text"]

#: Narrowest a prose column is made while it stays in its row (narrower, it reads as a column of word stubs).
PROSE_MIN = 24
#: Indent of what a row folds onto lines of its own, and of the blocks of the last-resort layout.
INDENT = 2


@cache
def console() -> Console:
    """The one console looplab prints to (rich reads the terminal's width, or COLUMNS, once)."""
    return Console(highlight=False)


@dataclass(frozen=True)
class Col:
    """One column of a terminal table, and how it gives way on a narrow terminal."""

    header: str
    #: The header when full ones do not fit; the legend under the table says what it stands for.
    short: str = ""
    #: What the legend says `short` means (default: the full header).
    means: str = ""
    #: Right-aligned (numbers).
    right: bool = False
    #: Prose: wraps at its words, so it can be narrower than its text.
    prose: bool = False
    #: Where the column goes when the row does not fit: "line" (a line of its own under the row, for
    #: long text) or "under" (a second line in the row's first cell, for a short value); "" stays.
    fold: Literal["", "line", "under"] = ""


#: A cell: plain text, or rich Text with its style.
Value = str | Text


@dataclass(frozen=True)
class _Layout:
    fold: bool
    headers: Literal["full", "wrap", "short"]


def print_table(
    title: str,
    cols: Sequence[Col],
    rows: Iterable[Sequence[Value]],
    notes: Iterable[str] = (),
    *,
    out: Console | None = None,
    show_header: bool = True,
) -> None:
    """Print a table that fits the console's width (see the module docstring); `notes` go under it."""
    out = out or console()
    lines = table_lines(title, cols, rows, notes, width=out.width, out=out, show_header=show_header)
    if title:
        out.print()  # a blank line sets each table apart from what came before
    for line in lines:
        out.print(line, overflow="fold")


def table_lines(
    title: str,
    cols: Sequence[Col],
    rows: Iterable[Sequence[Value]],
    notes: Iterable[str] = (),
    *,
    width: int,
    out: Console | None = None,
    show_header: bool = True,
) -> list[Text]:
    """The lines of a table laid out for `width` columns, none longer."""
    return _table(title, cols, rows, notes, width, out or console(), show_header)[0]


def tabular_lines(
    title: str,
    cols: Sequence[Col],
    rows: Iterable[Sequence[Value]],
    notes: Iterable[str] = (),
    *,
    width: int,
    out: Console | None = None,
) -> list[Text] | None:
    """`table_lines`, or None where only the last resort's blocks fit (the caller then has a shape of its own)."""
    lines, tabular = _table(title, cols, rows, notes, width, out or console(), True)
    return lines if tabular else None


def _table(
    title: str,
    cols: Sequence[Col],
    rows: Iterable[Sequence[Value]],
    notes: Iterable[str],
    width: int,
    out: Console,
    show_header: bool,
) -> tuple[list[Text], bool]:
    """The table's lines, and whether they are a table (False: the last resort's blocks)."""
    width = max(width, 1)
    cells = [[v if isinstance(v, Text) else Text(v) for v in row] for row in rows]
    folds = any(c.fold for c in cols)
    layouts = [_Layout(False, "full")]
    if folds:
        layouts.append(_Layout(True, "full"))
    if show_header:
        layouts.append(_Layout(folds, "wrap"))
        if any(c.short for c in cols):
            layouts.append(_Layout(folds, "short"))
    head = wrap_text(Text(title, style="bold"), width, out) if title else []
    notes = list(notes)
    for layout in layouts:
        for gap in (2, 1):  # two spaces between columns where they fit, else one
            body = _laid_out(cols, cells, layout, gap, width, out, show_header)
            if body is not None:
                legend = _legend(cols) if layout.headers == "short" else []
                return head + body + note_lines([*legend, *notes], width, out), True
    return head + _blocks(cols, cells, width, out) + note_lines(notes, width, out), False


def _laid_out(
    cols: Sequence[Col],
    rows: list[list[Text]],
    layout: _Layout,
    gap: int,
    width: int,
    out: Console,
    show_header: bool,
) -> list[Text] | None:
    """The table as rows of columns in `layout`, or None when it does not fit `width`."""
    folded = {i for i, c in enumerate(cols) if layout.fold and c.fold}
    inrow = [i for i in range(len(cols)) if i not in folded]
    under = [i for i in sorted(folded) if cols[i].fold == "under"]
    lines_of = [i for i in sorted(folded) if cols[i].fold == "line"]

    def header(i: int) -> str:
        c = cols[i]
        return c.short if layout.headers == "short" and c.short else c.header

    headers = [header(i) for i in inrow]
    if under:
        headers[0] = " / ".join([headers[0], *(header(i) for i in under)])
    table = []
    for row in rows:
        first = row[inrow[0]].copy()
        for i in under:  # indented, so it reads as the first cell's second line, not a row of its own
            if row[i].plain:
                first.append("\n" + " " * INDENT)
                first.append_text(Text(row[i].plain, style="dim"))
        table.append([first, *(row[i] for i in inrow[1:])])

    widths: list[int] = []
    natural: list[int] = []
    for j, i in enumerate(inrow):
        words = headers[j].split() or [""]
        head_w = _width(Text(headers[j])) if layout.headers == "full" else max(cell_len(w) for w in words)
        head_w = head_w if show_header else 0
        column = [r[j] for r in table]
        nat = max([head_w, *(_width(t) for t in column)])
        natural.append(nat)
        if cols[i].prose:
            widths.append(max(min(nat, PROSE_MIN), head_w, *(_longest_word(t) for t in column)))
        else:
            widths.append(nat)
    spare = width - sum(widths) - gap * (len(inrow) - 1)
    if spare < 0:
        return None
    # The room left goes to the prose columns, a cell at a time, until each holds its longest line.
    growing = [j for j, i in enumerate(inrow) if cols[i].prose]
    while spare > 0 and (growing := [j for j in growing if widths[j] < natural[j]]):
        for j in growing[:spare]:
            widths[j] += 1
            spare -= 1
    justify = ["right" if cols[i].right else "left" for i in inrow]
    lines: list[Text] = []
    if show_header:
        heads = [Text(h, style="bold") for h in headers]
        lines += _row(heads, widths, justify, gap, out)
        for i in lines_of:  # where the rows' folded lines go, the header says what they hold
            lines += indented(Text(header(i), style="bold"), width, out)
        lines.append(Text("─" * (sum(widths) + gap * (len(widths) - 1)), style="dim"))
    label = len(lines_of) > 1  # one folded column needs no name; several do
    for row, source in zip(table, rows, strict=True):
        lines += _row(row, widths, justify, gap, out)
        for i in lines_of:
            if source[i].plain.strip():
                text = Text(f"{cols[i].header}: ", style="dim") + source[i] if label else source[i]
                lines += indented(text, width, out)
    return lines


def _row(cells: list[Text], widths: list[int], justify: list[str], gap: int, out: Console) -> list[Text]:
    """One table row: each cell wrapped to its column, side by side, padded to the columns' widths."""
    blocks = [
        list(cell.wrap(out, w, justify=j, overflow="fold"))  # type: ignore[arg-type]
        for cell, w, j in zip(cells, widths, justify, strict=True)
    ]
    lines = []
    for k in range(max(len(b) for b in blocks)):
        line = Text()
        for n, (block, w) in enumerate(zip(blocks, widths, strict=True)):
            if n:
                line.append(" " * gap)
            line.append_text(block[k] if k < len(block) else Text(" " * w))
        line.rstrip()
        lines.append(line)
    return lines


def _blocks(cols: Sequence[Col], rows: list[list[Text]], width: int, out: Console) -> list[Text]:
    """The last resort: each row its first cell, then `header: value` for the rest, wrapped."""
    lines: list[Text] = []
    for row in rows:
        lines += wrap_text(Text(row[0].plain, style="bold"), width, out)
        parts = [
            Text(f"{c.header}: ", style="dim") + Text(" ").join(v.split("\n"))
            for c, v in zip(cols[1:], row[1:], strict=True)
            if v.plain.strip()
        ]
        if parts:
            lines += indented(Text(" · ", style="dim").join(parts), width, out)
    return lines


def _legend(cols: Sequence[Col]) -> list[str]:
    shorts = [f"{c.short} = {c.means or c.header}" for c in cols if c.short]
    return ["legend: " + " · ".join(shorts)] if shorts else []


def note_lines(notes: Iterable[str], width: int, out: Console) -> list[Text]:
    """The notes under a table: dim, each wrapped to `width`."""
    return [line for note in notes for line in wrap_text(Text(note, style="dim"), width, out)]


def wrap_text(text: Text, width: int, out: Console) -> list[Text]:
    """`text` wrapped at its words to `width` columns (a word wider than that folds), each line's trailing space
    dropped."""
    lines = list(text.wrap(out, max(width, 1), overflow="fold"))
    for line in lines:
        line.rstrip()
    return lines


def indented(text: Text, width: int, out: Console, *, hanging: bool = False) -> list[Text]:
    """`text` wrapped under an indent; `hanging`: its continuation lines indented once more."""
    indent = min(INDENT, width - 1)
    more = min(2 * INDENT, width - 1) if hanging else indent
    lines = wrap_text(text, width - more, out)
    if hanging and lines:  # the first line may use the room the continuations leave
        first = wrap_text(text, width - indent, out)[0]
        rest = text[len(first.plain) :]
        rest = rest[len(rest.plain) - len(rest.plain.lstrip()) :]
        lines = [first, *(wrap_text(rest, width - more, out) if rest.plain else [])]
    return [Text(" " * (more if k else indent)) + line for k, line in enumerate(lines)]


def _width(text: Text) -> int:
    return max((cell_len(line) for line in text.plain.split("\n")), default=0)


def _longest_word(text: Text) -> int:
    """The widest word, a line's indent counted with its first word (a folded cell's line under the first is
    indented, and the indent stays when the line wraps)."""
    longest = 0
    for line in text.plain.split("\n"):
        if words := line.split():
            indent = cell_len(line) - cell_len(line.lstrip())
            longest = max(longest, indent + cell_len(words[0]), *(cell_len(w) for w in words))
    return longest


def markdown_lines(lines: Iterable[str], *, out: Console | None = None) -> None:
    """Lines holding Markdown pipe tables (the bench modes' output), each table laid out for the terminal."""
    out = out or console()
    pending: list[str] = []

    def flush() -> None:
        if not pending:
            return
        parsed = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in pending]
        header, rule, body = parsed[0], parsed[1] if len(parsed) > 1 else [], parsed[2:]
        right = [cell.endswith(":") for cell in rule] + [False] * len(header)
        cols = [Col(h, right=right[k], prose=not right[k] and k > 0) for k, h in enumerate(header)]
        print_table("", cols, [(row + [""] * len(header))[: len(header)] for row in body], out=out)
        pending.clear()

    for line in lines:
        if line.lstrip().startswith("|"):
            pending.append(line)
            continue
        flush()
        for wrapped in wrap_text(Text(line), out.width, out) or [Text()]:
            out.print(wrapped)
    flush()
