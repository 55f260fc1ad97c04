"""The report's charts, drawn by matplotlib as inline SVG: per case, cumulative input tokens per step and request
bytes per model call, one line a runner, each runner in its own colour, marker and dash pattern in every chart.

Runners whose values are identical share one line named with all of them; the runners a case's divergence line
names are drawn bold.
"""

from __future__ import annotations

import html
import io
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup

from looplab.views.runs import RunView, slug

#: One colour per runner, the same in every chart: matplotlib's tab10, then the darker and middle shades of
#: tab20b's five hues (those least like tab10's first), so 20 runners get 20 colours. Colour alone cannot tell
#: 14 lines apart (nor help a colour-blind reader), so each runner also gets its own marker and dash pattern.
PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
    "#393b79", "#637939", "#e7ba52", "#843c39", "#7b4173", "#b5cf6b", "#8c6d31", "#6b6ecf", "#d6616b", "#ce6dbd",
)  # fmt: skip
#: One marker shape per runner (drawn hollow, so markers that land on the same point stay visible as outlines);
#: the round ones (hexagons, octagon) come last, as they read as circles at this size.
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "p", "*", "d", "x", "+", "1", "2", "3", "h", "8", "H")
#: One dash pattern per runner (on/off lengths in line widths); the first runner's line is solid.
DASHES: tuple[tuple[float, ...] | None, ...] = (
    None, (6, 2), (2, 2), (6, 2, 2, 2), (10, 3), (1, 2), (6, 2, 2, 2, 2, 2), (10, 2, 2, 2),
    (4, 4), (10, 2, 4, 2), (3, 1), (12, 2, 2, 2, 2, 2), (2, 4), (8, 2, 1, 2, 1, 2),
)  # fmt: skip
#: How every chart draws text: as the characters given, nothing parsed. With mathtext on, a name with two `$`
#: (`my$\frac$runner`) is parsed as a formula, and one that is not valid TeX stops the whole report; with
#: usetex on (a user's matplotlibrc) every text goes through LaTeX. Tick labels are plain numbers either way.
PLAIN_TEXT = {"text.parse_math": False, "text.usetex": False, "axes.formatter.use_mathtext": False}
#: The charts' one font, named alone: the SVG repeats the family list in every text element, and the browser
#: falls back to its own sans-serif either way.
CHART_FONT = {"font.family": "sans-serif", "font.sans-serif": ["DejaVu Sans"]}


@dataclass(frozen=True)
class RunnerStyle:
    """How one runner's line looks in every chart: colour, marker and dash pattern (None: solid)."""

    colour: str
    marker: str
    dashes: tuple[float, ...] | None


def runner_styles(runners: Sequence[str]) -> dict[str, RunnerStyle]:
    """Each runner's style, by its place among the report's runners, so it is the same in every chart."""
    return {
        runner: RunnerStyle(PALETTE[i % len(PALETTE)], MARKERS[i % len(MARKERS)], DASHES[i % len(DASHES)])
        for i, runner in enumerate(runners)
    }


@dataclass(frozen=True)
class Series:
    """One line of a chart: the runners whose values are identical, and those values per model call."""

    runners: tuple[str, ...]
    ys: tuple[float, ...]

    @property
    def label(self) -> str:
        """The legend entry: the runners' names, the first two and a count past three."""
        names = self.runners
        return ", ".join(names) if len(names) <= 3 else f"{names[0]}, {names[1]}, +{len(names) - 2} same"


def chart_series(kind: str, runners: Sequence[str], firsts: dict[str, RunView]) -> list[Series]:
    """The lines of a case's chart (`tokens`: cumulative input tokens; `bytes`: request bytes), one per distinct
    series, in runner order.

    Runners whose values are identical share one line labelled with all their names: drawn separately the
    last one would paint over the others, and a legend entry for a line nobody can see misleads; one line
    with every name says what the reader wants to know, that those runners sent the same thing.
    """
    grouped: dict[tuple[float, ...], list[str]] = {}
    for runner in runners:
        view = firsts.get(runner)
        if view is None or view.result is None or not view.result.trace.steps:
            continue
        calls = [s.model_call for s in view.result.trace.steps]
        if kind == "tokens":
            ys: list[float] = []
            total = 0
            for c in calls:
                total += c.input_tokens
                ys.append(total)
        else:
            ys = [c.request_bytes for c in calls]
        grouped.setdefault(tuple(ys), []).append(runner)
    return [Series(tuple(names), ys) for ys, names in grouped.items()]


def chart(
    kind: str, case: str, series: Sequence[Series], styles: dict[str, RunnerStyle], differs: Sequence[str] = ()
) -> Markup:
    """Cumulative input tokens per step (`tokens`) or request bytes per model call (`bytes`), one line a series.

    The lines of the runners in `differs` (those the case's divergence line names) are drawn bold and on top,
    the others fainter, so the chart shows the same runners the line names, even inside a bundle of lines.
    """
    import matplotlib  # here: only reports need it, and it takes a while to import
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    labels = [s.label for s in series]
    # The legend sits below the axes, in as many columns as the longest name allows: beside them it would
    # squeeze the plot, and inside it would hide the first steps, where the runners differ most.
    widest = max((len(label) for label in labels), default=10)
    # A column is the handle, the gaps and the label (about 3.9 pt a character at 7 pt) of a 455 pt wide figure.
    columns = max(1, min(len(labels), int(455 // (50 + 3.9 * widest))))
    rows = -(-len(labels) // columns) if labels else 0
    buf = io.StringIO()
    # Every text is made and drawn inside this context: text objects take `text.parse_math` and `text.usetex`
    # when they are created, tick labels when the figure is drawn. Text stays text in the SVG (smaller,
    # selectable); a salt per chart keeps the clip-path ids unique within the page.
    with (
        matplotlib.rc_context({**PLAIN_TEXT, **CHART_FONT, "svg.fonttype": "none", "svg.hashsalt": f"{kind}-{case}"}),
        warnings.catch_warnings(),
    ):
        # The SVG keeps text as text, which the browser draws in its own fonts: a glyph matplotlib's font lacks
        # (a name in CJK) only makes its layout estimate a little off, not worth a warning on the terminal.
        warnings.filterwarnings("ignore", message="Glyph .* missing from font", category=UserWarning)
        fig = Figure(figsize=(6.4, 2.7 + 0.16 * rows), layout="constrained")
        ax = fig.subplots()
        longest = 1
        handles = []
        for k, line in enumerate(series):
            style = styles[line.runners[0]]
            xs = list(range(1, len(line.ys) + 1))
            longest = max(longest, len(xs))
            bold = bool(set(line.runners) & set(differs))
            (drawn,) = ax.plot(
                xs,
                line.ys,
                color=style.colour,
                alpha=1.0 if bold or not differs else 0.6,
                zorder=3 if bold else 2,
                linewidth=2.0 if bold else 1.4,
                linestyle="-" if style.dashes is None else (0, style.dashes),
                marker=style.marker,
                markersize=6,
                markerfacecolor="none",
                markeredgewidth=1.2,
            )
            drawn.set_gid(f"series-{k}")  # names the line's SVG group, which gets a hover title below
            handles.append(drawn)
        ax.set_xlabel("model call (step)")
        ax.set_ylabel("cumulative input tokens" if kind == "tokens" else "request bytes")
        ax.set_xlim(0.5, longest + 0.5)  # whole steps only, even when every run made one call
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.grid(True, color="#e5e5e5", linewidth=0.8)
        ax.spines[["top", "right"]].set_visible(False)
        if labels:
            # Handles and labels given, not collected from the lines: collected, a label starting with `_`
            # (a runner named `_mine`) would be left out of the legend as matplotlib's "no legend" mark.
            # A long handle, so each dash pattern shows at least once in the legend.
            legend = fig.legend(
                handles, labels, loc="outside lower center", ncols=columns, fontsize=7, frameon=False, handlelength=4.5
            )
            for text, line in zip(legend.get_texts(), series, strict=True):
                if set(line.runners) & set(differs):
                    text.set_fontweight("bold")
        fig.savefig(buf, format="svg", metadata={"Date": None})
    svg = _smaller(buf.getvalue()[buf.getvalue().index("<svg") :])
    # Hovering a line (or one of its markers) names its runners: a native SVG tooltip, no script needed, for
    # the lines that run close together.
    for k, line in enumerate(series):
        names = html.escape(", ".join(line.runners))
        svg = svg.replace(f'<g id="series-{k}">', f'<g id="series-{k}"><title>{names}</title>', 1)
    return Markup(scope_ids(svg, slug(f"{kind}-{case}")))


#: An SVG id where it is named or referred to: the part before it, the id, the part after it.
_ID_OR_REFERENCE = re.compile(r'(\bid="|url\(#|href="#)([^")]+)([")])')


def _smaller(svg: str) -> str:
    """The same drawing in fewer bytes: no metadata block, no id nothing refers to (a chart's lines keep theirs,
    for their hover titles), coordinates to a tenth of a point, no no-op rotation, styles without spaces and a
    line's markers styled once by their group, SVG 2's `href` for `xlink:href`, no indentation."""
    svg = re.sub(r"<metadata>.*?</metadata>", "", svg, flags=re.DOTALL)
    used = set(re.findall(r'(?:url\(#|href="#)([^")]+)', svg))
    svg = re.sub(
        r' id="([^"]+)"', lambda m: m.group(0) if m.group(1) in used or m.group(1).startswith("series-") else "", svg
    )
    # Matplotlib names what it refers to by hashes (`m1860ec1cc7`), repeated at every marker: a letter and a
    # number name it as well.
    short = {name: f"{name[0]}{k}" for k, name in enumerate(sorted(n for n in used if not n.startswith("series-")))}
    svg = _ID_OR_REFERENCE.sub(lambda m: m.group(1) + short.get(m.group(2), m.group(2)) + m.group(3), svg)
    svg = re.sub(r'\b(d|x|y|transform)="[^"]*"', lambda m: re.sub(r"(\d\.\d)\d+", r"\1", m.group(0)), svg)
    svg = re.sub(r' transform="rotate\(-?0 [^")]*\)"', "", svg)
    svg = re.sub(r' style="[^"]*"', lambda m: re.sub(r"([:;,]) ", r"\1", m.group(0)), svg)
    svg = svg.replace(' xmlns:xlink="http://www.w3.org/1999/xlink"', "").replace("xlink:href=", "href=")
    svg = re.sub(r"\s*\n\s*", " ", svg).replace("> <", "><")
    return re.sub(r"<g([^>]*)>((?:<use [^>]*/>)+)</g>", _markers_styled_once, svg)


def _markers_styled_once(group: re.Match[str]) -> str:
    """A marker group whose `<use>`s share one style carries it instead (they inherit it): a line's markers are
    drawn alike, and a style repeated on each of them is most of a chart's bytes."""
    attrs, uses = group.groups()
    styles = set(re.findall(r' style="[^"]*"', uses))
    if len(styles) != 1 or "style=" in attrs or len(re.findall(r"<use ", uses)) != uses.count("style="):
        return group.group(0)
    (style,) = styles
    return f"<g{attrs}{style}>{uses.replace(style, '')}</g>"


def scope_ids(svg: str, prefix: str) -> str:
    """Prefix every id in `svg` (and the references to it): matplotlib names groups `xtick_1`, `line2d_3`, ...
    in every chart, and ids must stay unique once several charts share one page."""
    ids = set(re.findall(r'\bid="([^"]+)"', svg))
    if not ids:
        return svg

    def rename(match: re.Match[str]) -> str:
        name = match.group(2)
        return f"{match.group(1)}{prefix}-{name}{match.group(3)}" if name in ids else match.group(0)

    return _ID_OR_REFERENCE.sub(rename, svg)
