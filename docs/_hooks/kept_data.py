"""MkDocs hook: the site's pages read off the kept measurements, generated at every build, never edited by hand.

From `history/` (one file per framework version a runner was measured on, `looplab history record` writes them):

- `history.md`: every version measured per runner, and what changed from one to the next;
- `latest-results.md`: each runner's newest version, case by case;
- `scorecard.md`: the behaviour scorecard of each runner's newest version;
- on the hand-written pages, each marker line `looplab.views.site.MARKERS` names replaced by its part: the front
  page's comparison (`index.md`) and the caps at a glance (`caps.md`).

The Markdown is `looplab.views.site`'s. Every text these pages show from a kept file (a version, a case id, a
framework's message) is escaped (`looplab.views.markdown`): kept data comes from runs of unpinned framework releases,
and the site publishes it.

With `LOOPLAB_SITE_REPORT` naming an HTML report (the scheduled comparison's `looplab merge --html`), it is published
as `report.html` and the latest results link to it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

__all__ = ["FILLED", "PAGES", "WIDE", "filled", "on_files", "on_page_markdown", "pages"]

ROOT = Path(__file__).resolve().parents[2]
#: The generated pages, as the nav names them.
PAGES = ("history.md", "latest-results.md", "scorecard.md")
#: The hand-written pages with a generated part (a `looplab.views.site.MARKERS` line).
FILLED = ("index.md", "caps.md")
#: The pages whose tables are wide: shown without the table of contents beside them, so the tables have the room.
WIDE = ("index.md", "scorecard.md", "latest-results.md", "history.md", "iteration-caps.md")
REPORT = "report.html"


def pages(folder: Path, report: str | None = None) -> dict[str, str]:
    """Each generated page's Markdown (`PAGES`), read off the kept measurements in `folder`; with `report` (a page of
    the site), the latest results link to it. A kept file that cannot be read is a one-line error."""
    from looplab.records import history
    from looplab.views import site

    return site.pages(history.read(folder), report)


def filled(folder: Path, docs: Path = ROOT / "docs") -> dict[str, str]:
    """Each page of `FILLED` (read from `docs`) with its markers replaced by what the kept measurements in `folder`
    show."""
    from looplab.records import history
    from looplab.views import site

    kept = history.read(folder)
    return {name: site.fill((docs / name).read_text(encoding="utf-8"), kept) for name in FILLED}


def on_files(files: Files, config: Any) -> Files:
    """Add the generated pages (and the report, when given) to the build."""
    from looplab.records import history

    report = os.environ.get("LOOPLAB_SITE_REPORT")
    if report:
        files.append(File.generated(config, REPORT, abs_src_path=str(Path(report).resolve())))
    for name, text in pages(ROOT / history.HISTORY, REPORT if report else None).items():
        files.append(File.generated(config, name, content=text))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """Fill a `FILLED` page's markers from the kept measurements; give a `WIDE` page the table of contents' room."""
    from looplab.records import history
    from looplab.views import site

    name = page.file.src_uri
    if name in WIDE:
        hidden = page.meta.setdefault("hide", [])
        hidden += [h for h in ("toc", *(("navigation",) if name == "index.md" else ())) if h not in hidden]
    if name in FILLED:
        return site.fill(markdown, history.read(ROOT / history.HISTORY))
    return markdown
