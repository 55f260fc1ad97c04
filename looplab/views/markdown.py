"""Markdown pieces the generated pages share: a table cell, and how a measured run ended, in a line."""

from __future__ import annotations

from looplab.records.measurements import Ending

__all__ = ["cell", "ending_text"]


def cell(text: object) -> str:
    """Text as one Markdown table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def ending_text(e: Ending) -> str:
    """How a probe ended, in a line."""
    if e.exception:
        return f"raises `{e.exception}`: {cell(e.message)}"
    return e.how + (f": “{cell(e.message)}”" if e.message else "")
