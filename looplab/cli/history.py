"""`looplab history`: the kept measurements of every framework version, and keeping a new one.

`looplab history` shows, per runner, the versions measured and what changed between consecutive ones;
`looplab history record` keeps a caps measurement and a results document as one file per framework version, and
with `--drift DIR` writes the text of an issue for each new version whose measured behaviour moved. A version that is
not PEP 440, or a `--run-url` that is not an http(s) URL, is refused in one line before anything is kept.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import UTC
from pathlib import Path


def _add_history(sub: argparse._SubParsersAction) -> None:
    history = sub.add_parser(
        "history", help="the framework versions measured, and what changed between them (kept in history/)"
    )
    history.add_argument(
        "--dir", default="history", metavar="DIR", help="the kept measurements' folder (default: history)"
    )
    history.add_argument("--runner", action="append", metavar="R", help="runner (repeatable; default: every kept one)")
    actions = history.add_subparsers(dest="action", metavar="ACTION")
    keep = actions.add_parser(
        "record",
        help="keep a caps measurement and a results document, one file per framework version; a version kept "
        "already takes the new measurement",
    )
    keep.add_argument(
        "--caps", metavar="PATH", help="a caps measurement (iteration-caps.json, as `looplab caps` writes)"
    )
    keep.add_argument("--results", metavar="PATH", help="a results document (`looplab eval --json`, or merged shards)")
    keep.add_argument(
        "--dir", default=argparse.SUPPRESS, metavar="DIR", help="the kept measurements' folder (default: history)"
    )
    keep.add_argument(
        "--drift",
        metavar="DIR",
        help="write DIR/<runner>.md, an issue's text, for each new version whose measured behaviour moved from the "
        "version kept before it (nothing for a version that changed nothing)",
    )
    keep.add_argument(
        "--run-url", metavar="URL", help="the run that measured it (an http or https URL), linked from the drift text"
    )
    keep.add_argument("--date", metavar="YYYY-MM-DD", help="the measurement's date (default: today, UTC)")


def _history(args: argparse.Namespace) -> int:
    from looplab.records import history
    from looplab.views import history as shown

    folder = Path(args.dir)
    if args.action == "record":
        return _record(args, folder)
    if not folder.is_dir():
        from looplab.adapters.contract.errors import LooplabError

        raise LooplabError(f"{folder} is not a folder of kept measurements (`looplab history record` writes one)")
    from looplab.views import terminal

    kept = history.runners_of(history.read(folder), args.runner or ())
    print(shown.terminal(kept, width=terminal.console().width), end="")  # the terminal's width, or COLUMNS
    return 0


def _record(args: argparse.Namespace, folder: Path) -> int:
    from datetime import date, datetime

    from looplab import __version__
    from looplab.adapters import registry
    from looplab.adapters.contract import files
    from looplab.adapters.contract.errors import LooplabError
    from looplab.records import history, results
    from looplab.run import matrix
    from looplab.scenarios.cases import load_cases
    from looplab.views import history as shown
    from looplab.views import markdown, scorecard

    if not (args.caps or args.results):
        raise LooplabError("history record needs --caps PATH, --results PATH or both: what to keep")
    if args.run_url is not None:
        try:
            markdown.web_url(args.run_url)
        except ValueError as exc:
            raise LooplabError(f"--run-url: {exc}") from None
    try:
        day = date.fromisoformat(args.date) if args.date else datetime.now(UTC).date()
    except ValueError:
        raise LooplabError(f"--date takes YYYY-MM-DD, not {args.date!r}") from None
    if args.caps and not Path(args.caps).is_file():
        raise LooplabError(f"--caps {args.caps}: no such file")
    caps = scorecard.load_caps(Path(args.caps)) if args.caps else None
    document = results.read(Path(args.results)) if args.results else None
    races = matrix.races(registry.RUNNERS, load_cases().values())  # the built-in suite's, each runner's
    cards = shown.scorecard_cells(caps, document, races)
    measured = history.records_from(
        caps,
        document,
        measured_on=day,
        looplab=__version__,
        scorecards=cards,
        races=races,
        caps_name=args.caps or "",
        results_name=args.results or "",
    )
    if not measured:
        raise LooplabError("nothing to keep: no runner measured, and no scripted-model cell with a runner version")
    done = history.record(measured, folder)
    for one in done:
        before = f" (after {one.previous.version})" if one.previous and one.status == "new version" else ""
        moved = f": {len(one.moved)} fields moved" if one.moved else ""
        print(f"{one.status}: {one.record.runner} {one.record.version}{before}{moved} -> {one.path}")
    news = [one for one in done if one.news]
    if args.drift and news:
        try:
            Path(args.drift).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise LooplabError(f"--drift {args.drift}: {exc.strerror or exc}") from None
        for one in news:
            path = Path(args.drift) / f"{one.record.runner}.md"
            files.write_text(path, f"{shown.drift_title(one.record.runner)}\n\n{shown.drift_issue(one, args.run_url)}")
            print(f"drift: {path}")
    return 0


#: How each command's parser is added to `looplab`'s subcommands.
PARSERS: dict[str, Callable[[argparse._SubParsersAction], None]] = {"history": _add_history}
#: Each command's function.
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"history": _history}
