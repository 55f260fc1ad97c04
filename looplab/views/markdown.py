"""Markdown pieces the generated pages and issue texts share: inert text, inline code, a link to a web page, a table
cell, and how a measured run ended, in a line.

Text read from a kept file or a document (a framework's version, a case id, an exception's message) reaches pages
the site publishes and issues GitHub renders, and it comes from runs of unpinned framework releases: `text` and
`code` make any of it show as itself, in Python-Markdown (the site) and in GitHub's Markdown alike, never as HTML
or as Markdown that links, embeds, formats or breaks a table open.
"""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import urlsplit

from looplab.records.measurements import Ending

__all__ = ["cell", "counted", "ending_text", "headline", "web_url"]

#: HTML's own characters, as character references (a backslash does not stop raw HTML in Python-Markdown).
_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
#: What Markdown reads as syntax inside a line: escapes, code, emphasis, attribute lists (`{: ...}`, enabled on the
#: site), links and images, headings, table cells. Each is one Python-Markdown and CommonMark both unescape.
_SYNTAX = re.compile(r"[\\`*_{}\[\]()#!|]")
#: What a code span cannot hold as itself: a backtick ends it, a pipe ends a table cell, a backslash escapes in some
#: readers and not in others.
_NOT_IN_A_SPAN = re.compile(r"[`|\\]")
#: The characters a URL may hold as it is written (RFC 3986's unreserved, reserved and `%`), less the quote.
_URL_CHARACTERS = re.compile(r"[A-Za-z0-9\-._~:/?#\[\]@!$&()*+,;=%]+")
_WEB_SCHEMES = ("http", "https")


def headline(statement: str) -> str:
    """A measured statement's first part, before its first colon: what a summary cell shows (the rest, its numbers,
    stays in the caps doc)."""
    return statement.split(":")[0]


def counted(n: int, noun: str) -> str:
    """`n` and `noun`, plural unless `n` is 1: `1 call`, `3 model calls` (thousands separated)."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _line(value: object) -> str:
    """`value` as one line: every run of whitespace (newlines too) one space, any other control character shown as
    U+FFFD (Python-Markdown reads some of them as its own placeholders)."""
    joined = " ".join(str(value).split())
    return "".join("\ufffd" if unicodedata.category(ch) == "Cc" else ch for ch in joined)


def text(value: object) -> str:
    """`value` as inert Markdown on one line, fit for a table cell, a heading or a sentence: `&`, `<` and `>` as
    character references, every character Markdown reads as syntax backslash-escaped; it shows exactly as written."""
    escaped = "".join(_HTML.get(ch, ch) for ch in _line(value))
    return _SYNTAX.sub(lambda found: "\\" + found[0], escaped)


def code(value: object) -> str:
    """`value` as inline code, whatever it holds: a code span where nothing in it can end the span early (a code
    span shows HTML as text), else `<code>` around `text(value)`."""
    line = _line(value)
    if line and not _NOT_IN_A_SPAN.search(line):
        return f"`{line}`"
    return f"<code>{text(line)}</code>"


def web_url(url: str) -> str:
    """`url` if it is a plain web address: http or https, a host, and nothing but the characters a URL is written
    with (no whitespace, control character, quote, angle bracket, backslash or backtick); else a one-line ValueError."""
    try:
        parts = urlsplit(url)
    except ValueError:
        parts = None
    if parts is None or parts.scheme.lower() not in _WEB_SCHEMES or not parts.hostname:
        raise ValueError(f"{_shown(url)} is not an http or https URL with a host")
    if not _URL_CHARACTERS.fullmatch(url):
        raise ValueError(f"{_shown(url)} is not a plain http or https URL: it holds a character no URL is written with")
    return url


def link(label: str, url: str) -> str:
    """A Markdown link to a web page: `label` inert, `url` checked by `web_url`, its parentheses percent-encoded so
    the link's target ends where the URL does."""
    target = web_url(url).replace("(", "%28").replace(")", "%29")
    return f"[{text(label)}]({target})"


def _shown(value: str) -> str:
    """A refused value in an error's one line: quoted, control characters escaped, cut."""
    return repr(value[:80]) + ("..." if len(value) > 80 else "")


def cell(value: object) -> str:
    """Text looplab measured itself (the caps doc), as one Markdown table cell or inside a code span: one line, pipes
    escaped. Text a page reads from a kept file or a document goes through `text` or `code`."""
    return " ".join(str(value).split()).replace("|", "\\|")


def ending_text(e: Ending, *, inert: bool = False) -> str:
    """How a probe ended, in a line; `inert` for an ending read from a kept file (every part through `text` and
    `code`)."""
    said = text if inert else cell
    if e.exception:
        exception = code(e.exception) if inert else f"`{e.exception}`"
        return f"raises {exception}: {said(e.message)}"
    how = text(e.how) if inert else e.how
    return how + (f": “{said(e.message)}”" if e.message else "")
