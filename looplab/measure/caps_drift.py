"""`looplab caps --check`: how freshly measured caps differ from the committed docs, field by field and as a diff a
terminal shows whole; a library version that moved with the same behaviour is news, not drift."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from looplab.measure import caps_budgets
from looplab.measure.caps import to_json
from looplab.records import caps_changes
from looplab.records.caps_changes import Change
from looplab.records.measurements import CapsDoc, RunnerReport

__all__ = ["diff", "drift", "for_terminal"]


def diff(committed: str, fresh: str, name: str) -> str:
    """A unified diff from the committed file to what the installed libraries measure now."""
    return "".join(
        difflib.unified_diff(
            committed.splitlines(keepends=True),
            fresh.splitlines(keepends=True),
            f"{name} (committed)",
            f"{name} (measured)",
        )
    )


def for_terminal(text: str, width: int = 80) -> str:
    """`text` (a diff and its `changed:` lines) with no line wider than `width`: a long diff line goes on under its
    own `+`, `-` or ` ` mark and indent, so it still reads as one added, removed or kept line; any other long line
    wraps at its spaces, its continuation indented."""
    import textwrap

    out: list[str] = []
    for line in text.splitlines():
        if len(line) <= width:
            out.append(line)
            continue
        if line[:1] in "+- " and not line.startswith(("+++", "---")):
            body = line[1:]
            indent = line[0] + body[: min(len(body) - len(body.lstrip()), width // 2)]
            first, more = indent, indent + "  "
        else:
            first, more = "", "    "
        wrapper = textwrap.TextWrapper(
            width, initial_indent=first, subsequent_indent=more, break_on_hyphens=False, break_long_words=True
        )
        out += wrapper.wrap(line[len(first) :] if first else line)
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


@dataclass(frozen=True)
class VersionMove:
    """A runner whose library is installed in another version than the committed docs name."""

    runner: str
    distribution: str
    committed: str
    measured: str

    def __str__(self) -> str:
        return f"{self.runner}: {self.distribution} {self.committed} -> {self.measured}"


@dataclass(frozen=True)
class Drift:
    """What `looplab caps --check` found: versions that moved (news, not a failure) and measured changes.

    True when something other than a version changed, so `if drift:` reads as "the docs are out of date";
    `str()` is the diff of those changes (versions left out) followed by one line for each.
    """

    moved: tuple[VersionMove, ...]
    changes: tuple[Change, ...]
    diff: str

    def __bool__(self) -> bool:
        return bool(self.changes)

    def __str__(self) -> str:
        if not self.changes:
            return ""
        named = "\n".join(f"changed: {c}" for c in self.changes)
        return f"{self.diff}{named}\n"

    def moved_lines(self) -> list[str]:
        """One line for each version that moved, for the passing check to print."""
        return [f"version moved, measured behaviour unchanged: {m}" for m in self.moved] if not self else []


def _where_both_stream(fresh: CapsDoc, committed: CapsDoc) -> tuple[CapsDoc, CapsDoc]:
    """Both docs without the streamed section of a runner that lacks it in either: which modes a runner takes can be
    the wire API's (Strands streams every reply over Responses, Messages and Gemini), and that is not drift."""
    one_sided = {r.runner for doc in (fresh, committed) for r in doc.runners if r.streamed is None}

    def without(doc: CapsDoc) -> CapsDoc:
        kept = [r.model_copy(update={"streamed": None}) if r.runner in one_sided else r for r in doc.runners]
        return doc.model_copy(update={"runners": kept})

    return without(fresh), without(committed)


def drift(fresh: CapsDoc, committed_json: str, *, across_apis: bool = False) -> Drift:
    """How the fresh measurements differ from the committed ones, for the runners measured.

    `across_apis`: the fresh ones were measured on another wire API than the docs, so a token budget's rows are
    compared by how the run ended, not by their numbers (a request's size, and so its tokens, is the wire format's),
    and a streamed section only where both have one.

    Two children at once are compared within their race (`caps_changes.changes`). A version that moved while
    every measured field stayed the same is reported in `moved` and is not drift;
    anything else that differs (a count, an ending, a default, the cap code, a runner missing from the docs) is
    a `Change`, and the diff shows those changes with the versions left as committed.
    """
    committed = CapsDoc.model_validate_json(committed_json)
    if across_apis:
        fresh, committed = caps_budgets.sizeless(fresh), caps_budgets.sizeless(committed)
        fresh, committed = _where_both_stream(fresh, committed)
    by_runner = {r.runner: r for r in committed.runners}
    moved: list[VersionMove] = []
    changes: list[Change] = []
    comparable: list[RunnerReport] = []
    for report in fresh.runners:
        before = by_runner.get(report.runner)
        if before is None:
            changes.append(Change(report.runner, None, None, "runner", "not in the committed docs", "measured"))
            comparable.append(report)
            continue
        if before.version != report.version:
            moved.append(VersionMove(report.runner, report.distribution, before.version, report.version))
        changes += caps_changes.changes(before, report)
        comparable.append(report.model_copy(update={"version": before.version}))
    for field in ("generated_by", "safety_stop"):
        if getattr(committed, field) != getattr(fresh, field):
            changes.append(Change("(all runners)", None, None, field, getattr(committed, field), getattr(fresh, field)))
    measured = {r.runner for r in fresh.runners}
    committed.runners = [r for r in committed.runners if r.runner in measured]
    shown = fresh.model_copy(update={"runners": comparable})
    text = diff(to_json(committed), to_json(shown), "iteration-caps.json") if changes else ""
    return Drift(tuple(moved), tuple(changes), text)
