"""What a framework warned is shortened, in the record and on the terminal, after a whole word: never mid-word."""

from __future__ import annotations

import warnings

import pytest
from rich.console import Console

from looplab.adapters.boundary.noise import MESSAGE_CHARS, framework_noise
from looplab.run import harness
from looplab.scenarios.cases import load_cases
from looplab.shared_tools.records import shorten
from looplab.views import render

#: CrewAI's warning as a run's record keeps it (said seven times in one run).
CREWAI = "DeprecationWarning: function_calling_llm is deprecated and will be removed in a future release. (7 times)"


def _words_kept(original: str, shortened: str) -> None:
    """`shortened` is `original` up to the end of one of its words, then "…"."""
    assert shortened.endswith("…")
    head = shortened.removesuffix("…")
    assert original.startswith(head)
    assert original[len(head)].isspace(), f"cut mid-word: {shortened!r}"


@pytest.mark.parametrize("limit", [20, 21, 57, 99, 100, 104])
def test_shorten_cuts_after_a_whole_word(limit: int) -> None:
    shortened = shorten(CREWAI, limit)
    assert len(shortened) <= limit
    _words_kept(CREWAI, shortened)


def test_shorten_keeps_what_fits_and_cuts_a_lone_word_only_when_it_must() -> None:
    assert shorten(CREWAI, len(CREWAI)) == CREWAI
    assert shorten("x" * 50, 10) == "x" * 9 + "…"


def test_a_long_warning_is_kept_in_the_record_up_to_a_whole_word() -> None:
    message = " ".join(f"word{n}" for n in range(200))
    with framework_noise() as kept:
        warnings.warn(message, UserWarning, stacklevel=1)
    assert len(kept) == 1 and len(kept[0]) <= MESSAGE_CHARS
    _words_kept(f"UserWarning: {message}", kept[0])


def test_the_run_detail_shows_a_frameworks_warning_up_to_a_whole_word() -> None:
    with harness.endpoint(harness.ModelChoice()) as where:
        outcome = harness.run_one("handrolled", load_cases()["vip-compound"], where)
    assert outcome.result is not None, outcome.error
    outcome.result.warnings = [CREWAI, "DeprecationWarning: deprecated (6 times)"]
    out = Console(width=400, record=True, color_system=None)
    render.run_detail(outcome, out=out)
    line = next(ln for ln in out.export_text().splitlines() if "message(s) in the record" in ln)
    _words_kept(CREWAI, line.split("in the record: ", 1)[1].rstrip())
