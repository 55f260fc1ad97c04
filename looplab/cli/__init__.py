"""The `looplab` command: its parser, assembled from the command groups, and `main`, which runs one command.

Each group's parser and commands live in a module of their own (`running`, `measuring`, `history`,
`catalog`, `reporting`, `serving`); the options several share in `_options`, the input checks in `_inputs`. Building the
parser imports only the standard library: the commands import what they run with, so `--help` loads no
framework and no pydantic.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from looplab.cli import catalog, history, measuring, reporting, running, serving
from looplab.cli._inputs import did_you_mean, fit, shown

__all__ = ["main"]

#: The commands in the order `looplab --help` lists them.
_COMMAND_ORDER = (
    "run",
    "eval",
    "caps",
    "runners",
    "scorecard",
    "cases",
    "otel",
    "report",
    "merge",
    "bench",
    "history",
    "serve-model",
    "serve-tools",
    "new-suite",
)
_GROUPS = (running, measuring, history, catalog, reporting, serving)


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, like every other looplab error.

    argparse's own `error` prints the whole usage block first (several lines of
    option soup that bury the one that matters); this prints `looplab: ...` and
    where to find the usage instead (where the terminal has room), and exits 2 as argparse
    does. A value that is not one of the choices, or an option no command has, gets the
    nearest one instead of the whole list. Subcommand parsers are built from this class
    too (`add_subparsers` uses the parent's class).
    """

    def error(self, message: str) -> NoReturn:
        line = " ".join(message.split())
        self.exit(2, f"looplab: {fit(f'{line} (see `{self.prog} --help`)', line)}\n")

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        if action.choices is None or value in action.choices:
            return
        choices = [str(c) for c in action.choices]
        near = did_you_mean(str(value), choices)
        if isinstance(action, argparse._SubParsersAction):
            raise argparse.ArgumentError(None, f"unknown command {shown(str(value))}{near}")
        # A short list is the answer itself; the nearest alone when one is close.
        offered = near or f"; one of {', '.join(choices)}"
        raise argparse.ArgumentError(action, f"unknown value {shown(str(value))}{offered}")

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> argparse.Namespace:  # type: ignore[override]
        """As argparse's, but an option the command does not have is named with the nearest one it has."""
        parsed, extra = self.parse_known_args(args, namespace)
        if extra:
            options = _options_of(self, getattr(parsed, "command", None))
            near = next((did_you_mean(w.partition("=")[0], options) for w in extra if w.startswith("-")), "")
            self.error(f"unrecognized arguments: {' '.join(extra)}{near}")
        return parsed


def _options_of(parser: argparse.ArgumentParser, command: str | None) -> list[str]:
    """The option strings of `command`'s parser (the top level's when there is none)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            parser = action.choices[command]
    return [option for action in parser._actions for option in action.option_strings]


class _Version(argparse.Action):
    """`--version`: print `looplab X.Y.Z` and exit 0; the version is read only when the option is given."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> NoReturn:
        from looplab import __version__

        sys.stdout.write(f"looplab {__version__}\n")
        parser.exit(0)


def _parser() -> argparse.ArgumentParser:
    """`looplab`'s parser: the top-level options, and each command's subparser from its group's module."""
    parser = _Parser(
        prog="looplab",
        description="Run one ReAct investigation through several agent runners and compare their loops.",
    )
    parser.add_argument("--version", action=_Version, help="print looplab's version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    adders = {name: add for group in _GROUPS for name, add in group.PARSERS.items()}
    for name in _COMMAND_ORDER:
        adders[name](sub)
    return parser


def _commands() -> dict[str, Callable[[argparse.Namespace], int]]:
    """Each command's function, by its name."""
    return {name: command for group in _GROUPS for name, command in group.COMMANDS.items()}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command `argv` names (default: the process's arguments); returns its exit code.

    Bad input is one line on stderr and exit 2; with no command, the usage.
    """
    args = _parser().parse_args(argv)
    if args.command is None:
        _parser().print_help()
        return 0
    try:
        return _commands()[args.command](args)
    except Exception as exc:
        # Imported only now: it loads the contract's pydantic models, which `run` and `eval` import after their
        # status line (`looplab.cli.running.loading`).
        from looplab.adapters.contract.errors import LooplabError

        if not isinstance(exc, LooplabError):
            raise
        print(f"looplab: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
