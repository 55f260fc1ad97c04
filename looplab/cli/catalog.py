"""`looplab runners`, `cases` and `new-suite`: the runners and cases there are, and a suite of your own to add."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from looplab.cli._inputs import case_sources
from looplab.cli._options import cases_option


def _add_runners(sub: argparse._SubParsersAction) -> None:
    sub.add_parser("runners", help="list runners, whether each is installed, and the extra that enables it")


def _add_cases(sub: argparse._SubParsersAction) -> None:
    cases_option(sub.add_parser("cases", help="list the cases"))


def _add_new_suite(sub: argparse._SubParsersAction) -> None:
    new = sub.add_parser("new-suite", help="write a suite folder for your own repo and test, ready for --cases")
    new.add_argument("dir", metavar="DIR", help="the suite folder to write (new, or without a suite in it)")
    new.add_argument("--repo", required=True, metavar="PATH", help="the repository to investigate (a folder)")
    new.add_argument("--target", required=True, metavar="TEST", help="the failing test, e.g. tests/test_x.py::test_y")
    new.add_argument("--id", dest="case_id", metavar="ID", help="the case's id (default: from the test's name)")


def _runners(args: argparse.Namespace) -> int:
    from looplab.adapters.registry import RUNNERS
    from looplab.views.listings import runners_table

    runners_table(RUNNERS.values())
    return 0


def _cases(args: argparse.Namespace) -> int:
    from looplab.scenarios.cases import load_cases
    from looplab.views.listings import cases_table

    # A listing reads each suite's tools.py and runs none of it: the tools a case names are checked by name.
    cases_table(load_cases(case_sources(args), import_tools=False, every=True).values())
    return 0


def _new_suite(args: argparse.Namespace) -> int:
    from looplab.cli import suite

    return suite.main(args)


#: How each command's parser is added to `looplab`'s subcommands.
PARSERS: dict[str, Callable[[argparse._SubParsersAction], None]] = {
    "runners": _add_runners,
    "cases": _add_cases,
    "new-suite": _add_new_suite,
}
#: What runs each command; it returns the exit code.
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "runners": _runners,
    "cases": _cases,
    "new-suite": _new_suite,
}
