"""A real browser for the tests, headless: Chromium loads a page from disk, and a script measures how its tables lay
out (tests/views/test_report.py, tests/views/test_site_layout.py). Tests using it are `full` and skip when Chromium
is missing."""

from __future__ import annotations

import html as html_module
import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["LAYOUT_SCRIPT", "Layout", "chromium", "layout", "needs_chromium", "run"]

#: How long one browser run may take (a cold start on a busy CI machine included).
TIMEOUT_S = 180
#: A cell holding more than one word is squeezed when narrower than this many of its own ems and wrapped.
MIN_CELL_EM = 6.0


def chromium() -> str | None:
    """The Chromium binary on PATH, if there is one."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


#: Marks a test that needs the browser: skipped, saying how to install it, where there is none.
needs_chromium = pytest.mark.skipif(
    chromium() is None,
    reason="Chromium is not installed (Debian: apt-get install chromium chromium-driver; .ci/run does this)",
)

_BASE = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


def run(url: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Chromium, headless, on `url` with `args` (`--dump-dom`, `--screenshot=...`), its profile in `profile`."""
    binary = chromium()
    assert binary is not None, "no Chromium (mark the test with needs_chromium)"
    cmd = [binary, *_BASE, f"--user-data-dir={profile}", *args, url]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)


#: Measures every table once the page has laid out, and writes what it found into the DOM as JSON (read back from
#: `--dump-dom`): per table, how far its content overflows the table's own box and each box around it up to the
#: page's content column, and the cells that hold more than one word but are squeezed to under `MIN_CELL_EM` ems
#: and wrapped (one word a line); and whether the page itself scrolls sideways.
LAYOUT_SCRIPT = """
<script>
(function () {
  function lines(cell) {
    var range = document.createRange();
    range.selectNodeContents(cell);
    var tops = {};
    Array.prototype.forEach.call(range.getClientRects(), function (r) {
      if (r.width > 0) { tops[Math.round(r.top)] = true; }
    });
    return Object.keys(tops).length;
  }
  function measure() {
    var out = {width: window.innerWidth, page_overflow: document.documentElement.scrollWidth - window.innerWidth,
               tables: []};
    document.querySelectorAll("table").forEach(function (table, n) {
      var column = table.closest("article, .md-content__inner, main, section") || document.body;
      var overflow = table.scrollWidth - table.clientWidth;
      // The boxes between the table and the column (the column itself may hold a box that bleeds into its margin).
      for (var el = table.parentElement; el && el !== column; el = el.parentElement) {
        overflow = Math.max(overflow, el.scrollWidth - el.clientWidth);
      }
      var right = table.getBoundingClientRect().left + table.scrollWidth;
      overflow = Math.max(overflow, right - column.getBoundingClientRect().right);
      var squeezed = [];
      table.querySelectorAll("td, th").forEach(function (cell) {
        var words = cell.textContent.trim().split(/\\s+/).filter(Boolean);
        var em = parseFloat(getComputedStyle(cell).fontSize);
        var width = cell.getBoundingClientRect().width;
        if (words.length > 1 && width < %(min_em)s * em && lines(cell) > 1) {
          squeezed.push({text: cell.textContent.trim().slice(0, 60), width: Math.round(width)});
        }
      });
      // The box the table scrolls in when it is wider than the column (itself or a box around it that scrolls
      // sideways), against the window: a table may scroll in its box, the box must stay on the screen.
      var scroller = table;
      for (var up = table; up && up !== column; up = up.parentElement) {
        if (/auto|scroll/.test(getComputedStyle(up).overflowX)) { scroller = up; }
      }
      var off = scroller.getBoundingClientRect().right - window.innerWidth;
      out.tables.push({index: n, id: table.id || "", overflow: Math.round(overflow), off_screen: Math.round(off),
                       head: (table.querySelector("th") || {textContent: ""}).textContent.trim().slice(0, 40),
                       squeezed: squeezed});
    });
    var pre = document.createElement("pre");
    pre.id = "layout-check";
    pre.textContent = JSON.stringify(out);
    document.body.appendChild(pre);
  }
  if (document.readyState === "complete") { measure(); } else { window.addEventListener("load", measure); }
})();
</script>
""".replace("%(min_em)s", str(MIN_CELL_EM))


@dataclass(frozen=True)
class Layout:
    """What the script measured on one page at one window size."""

    width: int
    page_overflow: int
    tables: list[dict]

    def overflowing(self, allowance: int = 1) -> list[dict]:
        """The tables whose content reaches past their box or the page's content column (by more than a pixel)."""
        return [t for t in self.tables if t["overflow"] > allowance]

    def off_screen(self, allowance: int = 1) -> list[dict]:
        """The tables whose box (the one they scroll in, if any) reaches past the window's right edge."""
        return [t for t in self.tables if t["off_screen"] > allowance]

    def squeezed(self) -> list[dict]:
        """The tables with a cell squeezed to one word a line."""
        return [t for t in self.tables if t["squeezed"]]


_FOUND = re.compile(r'<pre id="layout-check">(.*?)</pre>', re.S)


#: The page a measured page is shown in: an iframe of the width asked for, so a phone's width can be measured too
#: (headless Chromium keeps its window at least 500 px wide), its measurement copied out for `--dump-dom`.
_FRAME = """<!doctype html><html><head><meta charset="utf-8"><style>body{margin:0}iframe{border:0;display:block}</style>
</head><body><iframe id="page" src="%(src)s" style="width:%(width)dpx;height:%(height)dpx"></iframe>
<script>
document.getElementById("page").addEventListener("load", function () {
  var frame = this;
  function copy() {
    var found = frame.contentDocument && frame.contentDocument.getElementById("layout-check");
    if (!found) { setTimeout(copy, 50); return; }
    var pre = document.createElement("pre");
    pre.id = "layout-check";
    pre.textContent = found.textContent;
    document.body.appendChild(pre);
  }
  copy();
});
</script></body></html>
"""


def layout(page: Path, width: int, height: int, profile: Path) -> Layout:
    """`page` (an HTML file on disk) loaded at a `width` x `height` viewport, its tables measured: the page is copied
    beside itself (so its relative links resolve) with `LAYOUT_SCRIPT` before `</body>`, and shown in an iframe of
    that size."""
    html = page.read_text(encoding="utf-8")
    at = html.rfind("</body>")
    assert at >= 0, f"{page}: no </body>"
    probe = page.with_name(f"_layout_{page.name}")
    probe.write_text(html[:at] + LAYOUT_SCRIPT + html[at:], encoding="utf-8")
    frame = page.with_name(f"_frame_{page.name}")
    frame.write_text(_FRAME % {"src": probe.name, "width": width, "height": height}, encoding="utf-8")
    window = f"--window-size={max(width, 500) + 20},{height + 20}"
    args = (window, "--allow-file-access-from-files", "--virtual-time-budget=4000", "--dump-dom")
    done = run(frame.resolve().as_uri(), profile, *args)
    assert done.returncode == 0, done.stderr[-2000:]
    found = _FOUND.search(done.stdout)
    assert found, f"{page.name}: the layout script wrote nothing\n{done.stderr[-2000:]}"
    data = json.loads(html_module.unescape(found[1]))
    return Layout(width=data["width"], page_overflow=data["page_overflow"], tables=data["tables"])
