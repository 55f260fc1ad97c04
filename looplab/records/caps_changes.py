"""What differs between two measurements of one runner's caps, field by field, named as the caps doc names it.

`looplab caps --check` reads the installed library against the committed docs with it, and `looplab history` one
kept framework version against the next.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from looplab.records.measurements import RunnerReport

__all__ = ["Change", "RACE_SLACK", "changes", "shown"]


@dataclass(frozen=True)
class Change:
    """One measured difference: the runner, the knob (or the runner's own field), the knob value, what moved."""

    runner: str
    #: The knob the difference is under; `None` for a field of the runner's own (its mapping, its cap code).
    knob: str | None
    #: The knob value of the row (`unset` for the run without one); `None` for a field of the knob or runner.
    value: str | None
    #: The field that differs (`model_calls`, `ending.how`, `default`), or what is missing.
    field: str
    committed: Any
    measured: Any

    @property
    def where(self) -> str:
        """The knob and value it is under, as a person finds it in the docs (empty for the runner's own field)."""
        return (self.knob or "") + (f" = {self.value}" if self.value else "")

    def __str__(self) -> str:
        where = self.runner + (f", {self.where}" if self.where else "")
        return f"{where}: {self.field} {shown(self.committed)} -> {shown(self.measured)}"


#: The value of a field one side does not have.
MISSING: Any = object()


def shown(value: Any) -> str:
    """A field's value as JSON, cut to one short line."""
    text = "missing" if value is MISSING else json.dumps(value)
    return text if len(text) <= 80 else text[:77] + "..."


#: The key under which an ending keeps the framework's own counters (`Ending.counters`).
COUNTERS = "counters"

#: How many calls two children running at once may make more or fewer from one run to the next: a request of each
#: out at the same time, past a counter only one of them has checked (Pydantic AI's shared `request_limit` at 5 was
#: measured passed by one in one run and not in the next). That is the machine's timing, not the release's.
RACE_SLACK = 1


def changes(before: RunnerReport, after: RunnerReport, *, ignore: Iterable[str] = ("version",)) -> list[Change]:
    """The fields in which `after` differs from `before`, the top-level fields in `ignore` left out, row by row;
    two children at once compared within their race (`RACE_SLACK`)."""
    after = _within_race(before, _as_measured_then(before, after))
    left_out = set(ignore)
    old_doc, new_doc = before.model_dump(exclude=left_out), after.model_dump(exclude=left_out)
    found: list[Change] = []
    # A section one side never measured (None: the runner lacks it, or a looplab before it measured it) is one
    # change, not one a field.
    for section in sorted(k for k in old_doc.keys() & new_doc.keys() if (old_doc[k] is None) != (new_doc[k] is None)):
        was, now = ("not measured", "measured") if old_doc[section] is None else ("measured", "not measured")
        found.append(Change(before.runner, None, None, section, was, now))
        old_doc.pop(section), new_doc.pop(section)
    old, new = _leaves(old_doc), _leaves(new_doc)
    if not any(COUNTERS in path for path in old):  # measured before the framework's own counters were read
        new = {path: v for path, v in new.items() if COUNTERS not in path}
    for path in sorted(old.keys() | new.keys(), key=lambda p: [str(x) for x in p]):
        was, now = old.get(path, MISSING), new.get(path, MISSING)
        if was == now:
            continue
        knob, value, field = _located(path, new_doc if path in new else old_doc)
        found.append(Change(before.runner, knob, value, field, was, now))
    return found


def _as_measured_then(before: RunnerReport, after: RunnerReport) -> RunnerReport:
    """`after` without the parts `before` has none of (measured by a looplab from before them: a knob's run ended by
    a tool; under delegation two children at once, three levels, the child at its default), so a part one side
    never measured is no change."""
    if before.cost_budget is None and after.cost_budget is not None:
        after = after.model_copy(update={"cost_budget": None})
    unmeasured = {k.knob for k in before.knobs if k.ending_by_tool is None}
    if any(k.knob in unmeasured and k.ending_by_tool is not None for k in after.knobs):
        knobs = [k.model_copy(update={"ending_by_tool": None}) if k.knob in unmeasured else k for k in after.knobs]
        after = after.model_copy(update={"knobs": knobs})
    now, kept = after.delegation, before.delegation
    if now is None or kept is None:
        return after
    left_out: dict[str, object] = {}
    if not kept.parallel:
        left_out |= {"parallel": [], "parallel_counts": None, "parallel_races": None}
    if not kept.nested:
        left_out |= {"nested": [], "nested_counts": None}
    if kept.child_default is None:
        left_out |= {"child_default": None, "child_default_counts": None}
    if kept.counters_hold is None:
        left_out |= {"counters_hold": None}
    return after.model_copy(update={"delegation": now.model_copy(update=left_out)}) if left_out else after


def _within_race(before: RunnerReport, after: RunnerReport) -> RunnerReport:
    """`after`, with its parallel-delegation rows taken as `before`'s where they differ only as two children racing
    make them differ: by at most `RACE_SLACK` calls in each count, or by any count where both say thread timing
    decides them (`parallel_races`); ending the same way either way."""
    now, kept = after.delegation, before.delegation
    if now is None or kept is None or len(now.parallel) != len(kept.parallel) or not now.parallel:
        return after
    counts = ("model_calls", "parent_calls", "child_calls", "child_last_call")
    raced = kept.parallel_races is not None and now.parallel_races == kept.parallel_races  # timing decides the counts
    for a, b in zip(now.parallel, kept.parallel, strict=True):
        close = raced or all(abs((getattr(a, f) or 0) - (getattr(b, f) or 0)) <= RACE_SLACK for f in counts)
        if a.value != b.value or not close or (a.ending.how, a.ending.exception) != (b.ending.how, b.ending.exception):
            return after
    delegation = now.model_copy(update={"parallel": kept.parallel, "parallel_counts": kept.parallel_counts})
    return after.model_copy(update={"delegation": delegation})


def _leaves(value: Any, path: tuple[str | int, ...] = ()) -> dict[tuple[str | int, ...], Any]:
    """Every scalar in a dumped document, by its path of keys and list indices."""
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in _leaves(item, (*path, key)).items()}
    if isinstance(value, list):
        return {k: v for i, item in enumerate(value) for k, v in _leaves(item, (*path, i)).items()}
    return {path: value}


def _located(path: tuple[str | int, ...], report: dict[str, Any]) -> tuple[str | None, str | None, str]:
    """(knob, value, field) for a path in a runner report's dump: where a person looks for it in the docs."""
    head, rest = path[0], path[1:]
    if head == "mapping_rows" and rest:
        rows = report["mapping_rows"]
        value = rows[rest[0]]["value"] if rest[0] < len(rows) else f"row {rest[0] + 1}"
        return f"max_steps (onto {report['mapping']})", f"{value}", _field(rest[1:]) or "row"
    if head == "knobs" and rest:
        knobs = report["knobs"]
        knob = knobs[rest[0]]["knob"] if rest[0] < len(knobs) else f"knob {rest[0] + 1}"
        inner = rest[1:]
        if inner[:1] == ("rows",) and len(inner) > 1:
            rows = knobs[rest[0]]["rows"] if rest[0] < len(knobs) else []
            value = rows[inner[1]]["value"] if inner[1] < len(rows) else f"row {inner[1] + 1}"
            return knob, f"{value}", _field(inner[2:]) or "row"
        if inner[:1] == ("unset",):
            return knob, "unset", _field(inner[1:]) or "row"
        return knob, None, _field(inner) or "knob"
    if head == "token_budget" and rest[:1] == ("under_delegation",) and len(rest) > 1:
        section = report[head]
        rows = section["under_delegation"]
        value = rows[rest[1]]["value"] if rest[1] < len(rows) else f"row {rest[1] + 1}"
        return f"token budget under delegation ({section['knob']})", f"{value}", _field(rest[2:]) or "row"
    if head == "delegation" and rest[:1] in (("parallel",), ("nested",)) and len(rest) > 1:
        section = report[head]
        rows = section[rest[0]]
        value = rows[rest[1]]["value"] if rest[1] < len(rows) else f"row {rest[1] + 1}"
        shape = "two children at once" if rest[0] == "parallel" else "three levels"
        return f"under delegation, {shape} ({section['knob']})", f"{value}", _field(rest[2:]) or "row"
    if head == "delegation" and rest[:1] == ("child_default",):
        section = report[head]
        value = (section.get("child_default") or {}).get("value")
        return f"under delegation, the child at its default ({section['knob']})", f"{value}", _field(rest[1:]) or "row"
    if head in ("delegation", "token_budget") and rest[:1] == ("rows",) and len(rest) > 1:
        section = report[head]
        value = section["rows"][rest[1]]["value"] if rest[1] < len(section["rows"]) else f"row {rest[1] + 1}"
        where = "under delegation" if head == "delegation" else "token budget"
        return f"{where} ({section['knob']})", "unset" if value is None else f"{value}", _field(rest[2:]) or "row"
    if head == "cost_budget" and rest[:1] in (("rows",), ("under_delegation",)) and len(rest) > 1:
        section = report[head]
        rows = section[rest[0]]
        value = f"${rows[rest[1]]['value_usd']:g}" if rest[1] < len(rows) else f"row {rest[1] + 1}"
        where = "dollar budget" + (" under delegation" if rest[0] == "under_delegation" else "")
        return f"{where} ({section['knob']})", value, _field(rest[2:]) or "row"
    if head == "streamed" and rest[:1] in (("whole",), ("streamed",)) and report.get("streamed"):
        section = report["streamed"]
        return f"{rest[0]} replies at the cap ({section['knob']})", f"{section['value']}", _field(rest[1:]) or "row"
    return None, None, _field(path)


def _field(path: tuple[str | int, ...]) -> str:
    return ".".join(str(p) for p in path)
