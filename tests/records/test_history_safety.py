"""Kept data cannot inject into the site or an issue: what a kept file holds is shown as text, never as markup.

Kept files come from runs of the frameworks' newest unpinned releases, and the site publishes them, so every string
in one (a version, a case id, a framework's exception message, a knob's name) may be hostile. The site's pages are
rendered here as the site build renders them: the MkDocs hook's own page generation over a kept folder, then
Python-Markdown with the extensions mkdocs.yml enables. A drift issue's text is rendered as GitHub renders Markdown
(CommonMark with tables, raw HTML allowed: markdown-it-py) and as Python-Markdown does. The HTML is parsed and may
hold only the elements and attributes the pages' own Markdown makes: no `img`, no `script`, no `on*` attribute, no
link but the pages' own anchors, the site's pages and the run's URL. tests/project/test_docs.py builds the whole site
from such data with mkdocs (the full tier).

A version that is not PEP 440 is refused in one line where a measurement is recorded and where a kept file is read;
a run URL that is not a plain http(s) URL is refused in one line before anything is kept.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import unicodedata
from datetime import date
from functools import cache
from html.parser import HTMLParser
from pathlib import Path
from types import ModuleType
from typing import Any

import markdown as python_markdown
import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from looplab.cli import main
from looplab.records import history
from looplab.records.history import HistoryError, VersionRecord
from looplab.records.measurements import CapsDoc
from looplab.views import history as shown
from looplab.views import markdown as md
from tests.paths import REPO

ROOT = REPO
KEPT = ROOT / "history"
CAPS = ROOT / "docs" / "iteration-caps.json"
CHECKS = settings(deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
RUN_URL = "https://github.com/looplab-dev/looplab/actions/runs/7"

#: What issue 39 reproduced, and the other ways Markdown makes markup: raw HTML, links and images, attribute lists
#: (`{: onclick=...}`, enabled in mkdocs.yml), code spans and table cells broken open, headings, entities, comments,
#: autolinks, Python-Markdown's own placeholder characters.
PAYLOADS = (
    "9.9 <img src=x onerror=alert(1)>",
    "<script>alert(1)</script>",
    "[click](javascript:alert(1))",
    "![x](x onerror=alert(1))",
    "<a href='javascript:alert(1)'>x</a>",
    "x{: onclick=alert(1) }",
    "`code` | cell",
    "&lt;img src=x onerror=alert(1)&gt;",
    "\\<b>bold</b>",
    "<!-- hidden -->",
    "\n# heading\n",
    "*em* _em_ **strong**",
    "<https://example.com>",
    "\x02wzxhzdk:0\x03",
)
METACHARACTERS = "<>&\"'`[]()!|*_#{}\\~=:;/ \n\t\r"
hostile = st.lists(
    st.one_of(st.sampled_from(PAYLOADS), st.text(st.sampled_from(METACHARACTERS), max_size=4), st.text(max_size=6)),
    max_size=5,
).map("".join)
#: Kept versions: PEP 440, after the package's name where a runner's version names one (the reader accepts these).
versions = st.from_regex(
    r"([a-z]([a-z0-9-]{0,6}[a-z0-9])? )?([1-9]!)?[0-9]{1,3}(\.[0-9]{1,3}){0,2}((a|b|rc)[0-9])?(\+[a-z0-9]{1,4})?",
    fullmatch=True,
)
looplabs = st.from_regex(r"0\.[0-9]{1,2}(\.dev[0-9]{1,3})?(\+g[0-9a-f]{7})?", fullmatch=True)
#: Runner names: a kept file's folder, as the reader accepts it.
runners = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,12}", fullmatch=True)
#: The kept fields a page needs in their own form: the folder, the version, the measuring looplab, the date, and
#: the caps doc's closed set of how the last call's tools fared.
FIXED = {"runner", "version", "looplab", "measured_on", "looplab_history", "last_call_tools"}


# --- rendering as the site and GitHub do ---------------------------------------------------------------------


@cache
def hook() -> ModuleType:
    """docs/_hooks/kept_data.py, as MkDocs loads it."""
    spec = importlib.util.spec_from_file_location("kept_data_hook", ROOT / "docs" / "_hooks" / "kept_data.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@cache
def site_extensions() -> tuple[list[str], dict[str, dict[str, Any]]]:
    """mkdocs.yml's `markdown_extensions`: the names, and the options of those that have some."""
    names, options = [], {}
    for entry in yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["markdown_extensions"]:
        name, config = next(iter(entry.items())) if isinstance(entry, dict) else (entry, None)
        names.append(name)
        if config:
            options[name] = config
    return names, options


def site_html(text: str) -> str:
    """Markdown as the site build renders a page: Python-Markdown with mkdocs.yml's extensions."""
    names, options = site_extensions()
    return python_markdown.markdown(text, extensions=names, extension_configs=options)


def github_html(text: str) -> str:
    """Markdown as GitHub reads an issue: CommonMark with tables and strikethrough, raw HTML passed through (GitHub
    sanitizes it afterwards; here nothing may be left to sanitize)."""
    return MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"]).render(text)


class Elements(HTMLParser):
    """Every element of an HTML text, with its attributes; the text it shows, and what its scripts and styles hold."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.text: list[str] = []
        self.scripts: list[str] = []
        self._raw: str | None = None
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, attrs))
        if tag in ("script", "style"):
            self._raw = tag

    def handle_endtag(self, tag: str) -> None:
        if tag == self._raw:
            self._raw = None

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, attrs))

    def handle_data(self, data: str) -> None:
        (self.scripts if self._raw else self.text).append(data)

    def handle_comment(self, data: str) -> None:
        self.elements.append(("!--", []))

    def handle_pi(self, data: str) -> None:
        self.elements.append(("?", []))

    def unknown_decl(self, data: str) -> None:
        self.elements.append(("!", []))


#: What the pages' and the issue's own Markdown makes: headings (with their permalinks), paragraphs, tables, a list,
#: inline code, bold, and links.
OWN_TAGS = {"h1", "h2", "h3", "p", "table", "thead", "tbody", "tr", "th", "td", "ul", "li", "code", "strong", "a"}
#: The links they make: an anchor on the page, another page of the site, the run the drift issue names.
OWN_LINK = re.compile(r"#[\w.-]*|[\w-]+\.(md|html)(#[\w.-]*)?|" + re.escape(RUN_URL))


def assert_only_own_markup(html: str) -> Elements:
    """Every element and attribute of `html` is one the pages' own Markdown makes; returns the parse."""
    parsed = Elements(html)
    for tag, attrs in parsed.elements:
        assert tag in OWN_TAGS, f"<{tag}> came from kept data:\n{html}"
        for name, value in attrs:
            assert not name.startswith("on"), f"<{tag} {name}=...> came from kept data:\n{html}"
            if name == "href":
                assert value is not None and OWN_LINK.fullmatch(value), f"a link to {value!r}:\n{html}"
            elif name == "id":
                assert value is not None and re.fullmatch(r"[\w-]*", value), f"id {value!r}:\n{html}"
            else:
                assert (name, value) in {("class", "headerlink"), ("title", "Permanent link")}, (tag, name, value)
    return parsed


# --- hostile kept data ---------------------------------------------------------------------------------------


def template() -> dict[str, Any]:
    """A real kept file (caps, cases and scorecard cells all measured), as JSON."""
    return json.loads((KEPT / "langgraph" / "1.0.6.json").read_text(encoding="utf-8"))


def filled(value: Any, pool: list[str], count: list[int], key: str = "") -> Any:
    """`value` (a kept file's JSON) with every string, and every case id, taken from `pool` in turn."""

    def take() -> str:
        count[0] += 1
        return pool[count[0] % len(pool)]

    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            name = take() if key == "cases" else k
            out[name] = v if k in FIXED else filled(v, pool, count, k)
        return out
    if isinstance(value, list):
        return [filled(v, pool, count, key) for v in value]
    return take() if isinstance(value, str) else value


def hostile_record(runner: str, version: str, looplab: str, pool: list[str]) -> VersionRecord:
    """The template kept file with every string hostile but the fields a kept file holds in their own form."""
    doc = filled(template(), pool, [0])
    doc.update(runner=runner, version=version, looplab=looplab)
    return VersionRecord.model_validate(doc)


def keep(folder: Path, records: list[VersionRecord]) -> None:
    for one in records:
        path = folder / one.runner / history.file_name(one.version)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(history.to_json(one), encoding="utf-8")


@st.composite
def kept_folders(draw: st.DrawFn) -> list[VersionRecord]:
    """One or two runners, each kept at two versions, every free string of every file hostile."""
    made = []
    for runner in draw(st.lists(runners, min_size=1, max_size=2, unique_by=str.lower)):
        older, newer = draw(st.lists(versions, min_size=2, max_size=2, unique_by=history.file_name))
        for version in (older, newer):
            pool = draw(st.lists(hostile, min_size=1, max_size=6))
            made.append(hostile_record(runner, version, draw(looplabs), pool))
    return made


def drift_of(records: list[VersionRecord]) -> list[str]:
    """The drift issue's text for each runner's newer kept version against its older one."""
    texts = []
    for runner in dict.fromkeys(r.runner for r in records):
        older, newer = sorted((r for r in records if r.runner == runner), key=VersionRecord.sort_key)
        moved = tuple(history.changes_between(older, newer))
        news = history.Recorded(newer, Path("x.json"), "new version", older, moved)
        texts.append(shown.drift_issue(news, RUN_URL))
    return texts


@CHECKS
@given(kept_folders())
@example(
    [
        hostile_record("langgraph", "1.0.5", "0.1.0", list(PAYLOADS[:2])),
        hostile_record("langgraph", "1.0.6", "0.2.0", list(PAYLOADS[2:])),
    ]
)
def test_every_generated_page_shows_hostile_kept_data_as_text(tmp_path_factory, records: list[VersionRecord]) -> None:
    folder = tmp_path_factory.mktemp("history")
    keep(folder, records)
    pages = hook().pages(folder, "report.html")
    assert set(pages) == set(hook().PAGES)
    for text in pages.values():
        assert_only_own_markup(site_html(text))
    for text in drift_of(records):
        for html in (github_html(text), site_html(text)):
            parsed = assert_only_own_markup(html)
            assert ("a", [("href", RUN_URL)]) in parsed.elements


def test_the_reported_payloads_are_shown_whole_as_text_and_make_no_element(tmp_path: Path) -> None:
    # Issue 39: a version like `9.9 <img src=x onerror=alert(1)>` made live elements in the history pages. Every
    # other string a kept file holds carries it here; the version cannot (it is refused: below).
    payload = "<img src=x onerror=alert(1)>"
    pools = ([payload, "<script>alert(1)</script>"], ["<script>alert(1)</script>", payload])  # every field moves
    records = [hostile_record("langgraph", v, "0.1.0", pool) for v, pool in zip(("1", "2"), pools, strict=True)]
    keep(tmp_path, records)
    pages = hook().pages(tmp_path)
    newest_cases = set(records[-1].cases)  # hostile too: case ids come from the pool
    assert newest_cases and newest_cases <= {payload, "<script>alert(1)</script>"}
    for name in ("history.md", "latest-results.md", "scorecard.md"):
        shows = " ".join(assert_only_own_markup(site_html(pages[name])).text)
        # The latest results and the scorecard show the newest version only, its case ids among what they show.
        wanted = {payload, "<script>alert(1)</script>"} if name == "history.md" else newest_cases
        assert all(each in shows for each in wanted), f"{name} does not show the kept text as it is"
    [issue] = drift_of(records)
    for html in (github_html(issue), site_html(issue)):
        shows = " ".join(assert_only_own_markup(html).text)
        assert payload in shows and "<script>alert(1)</script>" in shows


@CHECKS
@given(st.text(), st.text(st.sampled_from(METACHARACTERS + "ab")))
def test_escaped_text_shows_exactly_what_it_holds_in_a_line_a_cell_and_code(anything: str, marks: str) -> None:
    for value in (anything, marks):
        expected = "".join("\ufffd" if unicodedata.category(ch) == "Cc" and not ch.isspace() else ch for ch in value)
        line = f"x {md.text(value)} y\n\n| a |\n|---|\n| {md.text(value)} |\n\nz {md.code(value)} z\n"
        for html in (site_html(line), github_html(line)):
            parsed = assert_only_own_markup(html)
            shows = " ".join("".join(parsed.text).split())
            for around in ("x {} y", "z {} z"):
                assert " ".join(around.format(expected).split()) in shows, (value, html)


# --- versions and run URLs, refused before they are kept ------------------------------------------------------


def test_a_version_read_from_a_document_that_is_not_pep_440_is_refused_in_one_line_naming_the_field(
    tmp_path: Path, capsys
) -> None:
    bad = "9.9 <img src=x onerror=alert(1)>"
    caps = CapsDoc.model_validate_json(CAPS.read_text(encoding="utf-8"))
    report = caps.runners[0].model_copy(update={"version": bad})
    path = tmp_path / "measured-caps.json"
    path.write_text(CapsDoc(runners=[report]).model_dump_json(), encoding="utf-8")
    folder = tmp_path / "history"
    assert main(["history", "record", "--caps", str(path), "--dir", str(folder), "--drift", str(tmp_path / "d")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{path}: runners[0].version" in err and "PEP 440" in err, err
    assert not folder.exists()


def test_a_cell_version_that_is_not_pep_440_is_refused_in_one_line_naming_the_field(tmp_path: Path, capsys) -> None:
    from looplab.records import results
    from looplab.records.outcome import RunOutcome
    from tests.records.test_results import sample

    run = sample().model_copy(update={"runner_version": "9.9 <script>alert(1)</script>"})
    path = results.write(results.build([RunOutcome(run.runner, "vip-compound", run)]), tmp_path / "all.json")
    folder = tmp_path / "history"
    assert main(["history", "record", "--results", str(path), "--dir", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{path}: cells[0].runner_version" in err and "PEP 440" in err, err
    assert not folder.exists()


def test_a_kept_file_whose_version_is_not_pep_440_is_refused_in_one_line_and_never_rendered(
    tmp_path: Path, capsys
) -> None:
    bad = "9.9 <img src=x onerror=alert(1)>"
    doc = template() | {"version": bad}
    path = tmp_path / "langgraph" / history.file_name(bad)
    path.parent.mkdir()
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(HistoryError, match="version") as refused:
        hook().pages(tmp_path)
    assert "\n" not in str(refused.value) and str(path) in str(refused.value)
    assert main(["history", "--dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


@pytest.mark.parametrize(
    "url",
    [
        "javascript:alert(1)",
        "data:text/html,<script>alert(1)</script>",
        "ftp://example.com/run",
        "https://",
        "https:///actions/runs/7",
        "https://example.com/<script>",
        "https://example.com/a b",
        'https://example.com/"onmouseover=alert(1)',
        "https://example.com/'x",
        "https://example.com/`x`",
        "https://example.com/\\x",
        "https://example.com/\x00",
        "https://example.com/\n[x](javascript:alert(1))",
    ],
)
def test_a_run_url_that_is_not_a_plain_web_address_is_refused_in_one_line_before_anything_is_kept(
    url: str, tmp_path: Path, capsys
) -> None:
    folder = tmp_path / "history"
    argv = ["history", "record", "--caps", str(CAPS), "--dir", str(folder), "--drift", str(tmp_path / "drift")]
    assert main([*argv, "--run-url", url]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--run-url" in err, err
    assert not folder.exists()
    with pytest.raises(ValueError, match="http"):
        md.link("this run", url)


def test_a_run_url_with_parentheses_links_to_the_same_address(tmp_path: Path) -> None:
    folder = tmp_path / "history"
    (folder / "langgraph").mkdir(parents=True)
    shutil.copy(KEPT / "langgraph" / "1.0.5.json", folder / "langgraph")
    newer = history.read(KEPT)["langgraph"][1]
    [done] = history.record([newer.model_copy(update={"measured_on": date(2026, 12, 5)})], folder)
    url = "https://example.com/runs/(7)"
    parsed = Elements(github_html(shown.drift_issue(done, url)))
    assert ("a", [("href", "https://example.com/runs/%287%29")]) in parsed.elements


@CHECKS
@given(kept_folders(), st.text(st.characters(categories=["Cc"]), min_size=1, max_size=4))
def test_looplab_history_prints_no_control_character_a_kept_file_holds(
    tmp_path_factory, records: list[VersionRecord], controls: str
) -> None:
    # An escape sequence in a kept file (a framework's message, say) would otherwise reach the terminal as it is.
    folder = tmp_path_factory.mktemp("history")
    marked = [hostile_record(r.runner, r.version, "0.1.0", [f"\x1b]0;x\x07{controls}\x1b[2J"]) for r in records]
    keep(folder, marked)
    printed = shown.terminal(history.runners_of(history.read(folder), ()))
    assert printed and all(ch.isprintable() for line in printed.split("\n") for ch in line)
