"""MkDocs hook: the site's pages read off the kept measurements, generated at every build, never edited by hand.

From `history/` (one file per framework version a runner was measured on, `looplab history record` writes them):

- `history.md`: every version measured per runner, and what changed from one to the next;
- `latest-results.md`: each runner's newest version, case by case;
- `scorecard.md`: the behaviour scorecard of each runner's newest version.

Every text these pages show from a kept file (a version, a case id, a framework's message) is escaped
(`looplab.views.markdown`): kept data comes from runs of unpinned framework releases, and the site publishes it.

With `LOOPLAB_SITE_REPORT` naming an HTML report (the scheduled comparison's `looplab merge --html`), it is published
as `report.html` and the latest results link to it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

__all__ = ["PAGES", "on_files", "pages"]

ROOT = Path(__file__).resolve().parents[2]
#: The generated pages, as the nav names them.
PAGES = ("history.md", "latest-results.md", "scorecard.md")
REPORT = "report.html"


def pages(folder: Path, report: str | None = None) -> dict[str, str]:
    """Each generated page's Markdown (`PAGES`), read off the kept measurements in `folder`; with `report` (a page of
    the site), the latest results link to it. A kept file that cannot be read is a one-line error."""
    from looplab.records import history
    from looplab.views import history as shown

    kept = history.read(folder)
    latest = shown.results_markdown(kept)
    if report:
        latest += f"\nThe scheduled comparison's side-by-side report, every run's trace: [report.html]({report}).\n"
    return {
        "history.md": shown.markdown(kept),
        "latest-results.md": latest,
        "scorecard.md": shown.scorecard_markdown(kept),
    }


def on_files(files: Files, config: Any) -> Files:
    """Add the generated pages (and the report, when given) to the build."""
    from looplab.records import history

    report = os.environ.get("LOOPLAB_SITE_REPORT")
    if report:
        files.append(File.generated(config, REPORT, abs_src_path=str(Path(report).resolve())))
    for name, text in pages(ROOT / history.HISTORY, REPORT if report else None).items():
        files.append(File.generated(config, name, content=text))
    return files
