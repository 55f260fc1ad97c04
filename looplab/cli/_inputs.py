"""The checks several commands run on their input before anything runs, and the one-line errors they give.

Runner and case names (with the nearest one when a name is not one), the runners and cases a command takes,
the files it will write, the runners that can take the model, and the runner environments they need. Imports
stay inside the functions: the parser imports this module, and `--help` loads no pydantic.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any


def fit(*lines: str) -> str:
    """The first of `lines` that fits the terminal (or COLUMNS) after `looplab: `; else the last, the shortest."""
    import shutil

    room = shutil.get_terminal_size().columns - len("looplab: ")
    return next((line for line in lines if len(line) <= room), lines[-1])


def shown(word: str, limit: int = 40) -> str:
    """A word the user typed, quoted, and cut to `limit` characters so that a pasted paragraph stays one short line."""
    return repr(word if len(word) <= limit else word[: limit - 3] + "...")


def did_you_mean(word: str, choices: Sequence[str]) -> str:
    """`; did you mean X?` for the closest of `choices`, or '' when none is close."""
    from looplab.scenarios.strict import nearest  # on an error's path only: --help imports no pydantic

    return nearest(word, choices)


def unknown(kind: str, word: str, known: Sequence[str], listed_by: str) -> str:
    """The one line for a name that is not one of `known`: the nearest if one is close, and `listed_by`, the
    command that lists them, where the terminal has room; on a narrow one the nearest name alone."""
    near = did_you_mean(word, known)
    line = f"unknown {kind} {shown(word)}{near}"
    return fit(f"{line} (`{listed_by}` lists them)", line, f"unknown {kind}{near}" if near else line)


def ready_to_write(option: str, path: str | None) -> None:
    """Before anything runs: `path` may be written by `adapters.files`' rule and its folder exists.

    If not, one line naming `option` and the path.
    """
    if not path:
        return
    from looplab.adapters.contract import files
    from looplab.adapters.contract.errors import LooplabError

    try:
        files.ready_to_write(path)
    except files.FileRefused as exc:
        raise LooplabError(f"{option} {exc}") from None


def case_sources(args: argparse.Namespace) -> list[Any]:
    """The case files and suite folders the command runs (see `looplab.cli.sources`)."""
    from looplab.cli import sources

    return sources.case_sources(args)


def check_runners(named: Sequence[str] | None) -> None:
    """A runner name that is not one: one line with the nearest name."""
    from looplab.adapters.contract.errors import LooplabError
    from looplab.adapters.registry import RUNNERS

    for name in named or []:
        if name not in RUNNERS:
            raise LooplabError(unknown("runner", name, list(RUNNERS), "looplab runners"))


def check_cases(named: Sequence[str], cases: Mapping[str, Any], args: argparse.Namespace) -> None:
    """A case id that is not one of `cases`: one line with the nearest id."""
    from looplab.adapters.contract.errors import LooplabError

    lister = "looplab cases" + "".join(f" --cases {p}" for p in getattr(args, "cases", None) or [])
    for name in named:
        if name not in cases:
            raise LooplabError(unknown("case", name, list(cases), lister))


def select(
    args: argparse.Namespace, default_cases: list[str] | None, own_environments: bool = False
) -> tuple[list[str], list]:
    """The runners and cases asked for; unknown names are one-line errors listing the known ones."""
    from looplab.adapters.contract.errors import LooplabError
    from looplab.adapters.registry import RUNNERS
    from looplab.scenarios.cases import load_cases

    sources = case_sources(args)
    # With --sandbox (checked before this), a suite's tools.py is described inside the sandbox too. Every case, so
    # that --case may name one that runs only when named (`Case.by_default`); unnamed, only the others run.
    sandbox = bool(getattr(args, "sandbox", False))
    cases = load_cases(sources, sandbox=sandbox, every=True)
    wanted_cases = args.case or (None if sources else default_cases) or list(load_cases(sources, sandbox=sandbox))
    check_cases(wanted_cases, cases, args)
    check_runners(args.runner)
    # A runner whose framework cannot share this environment runs in its own: naming one isolates the run.
    args.isolate_everyone = bool(getattr(args, "isolate", False))  # asked for: every runner in an environment
    if not own_environments and any(RUNNERS[r].elsewhere() for r in args.runner or []):
        args.isolate = True
    # In runner environments a runner needs only its programs here (node): its framework is installed there.
    isolated = getattr(args, "isolate", False) or getattr(args, "versions", None)
    usable = (lambda info: info.programs_found()) if isolated else (lambda info: info.installed())
    runners = args.runner or [name for name, info in RUNNERS.items() if info.by_default and usable(info)]
    elsewhere = [n for n, info in RUNNERS.items() if info.by_default and not info.in_all and n not in runners]
    if elsewhere and not args.runner and own_environments:  # measured there, in the order runners are listed
        runners = [n for n in RUNNERS if n in runners or (n in elsewhere and RUNNERS[n].programs_found())]
    elif elsewhere and not args.runner and hasattr(args, "isolate"):
        from looplab.views import terminal

        terminal.console().print(f"left out: {', '.join(elsewhere)} (add --isolate to run them)", style="dim")
    if getattr(args, "cmd", None):  # for --runner external, here and in every worker process
        import os

        from looplab.adapters.runners.external import EXTERNAL_COMMAND_ENV

        os.environ[EXTERNAL_COMMAND_ENV] = args.cmd
    if "external" in runners and not getattr(args, "cmd", None):
        raise LooplabError("--runner external needs --cmd 'COMMAND ...': the program to run as the runner")
    if not runners:
        raise LooplabError("no runner is installed: pip install 'looplab[all]'")
    return runners, [cases[c] for c in wanted_cases]


def runners_taking(choice: Any, runners: list[str]) -> list[str]:
    """The `runners` that can take `choice`'s model (and `--api`, and `--stream`); the others are skipped, before
    anything runs, with one line naming them. None left is bad input: the first one's reason, in one line."""
    from looplab.adapters.contract.errors import LooplabError
    from looplab.adapters.contract.model import PROVIDER_OF_API, ModelSpec, parse_model
    from looplab.adapters.contract.runner import RunnerDeclaration
    from looplab.adapters.registry import RUNNERS
    from looplab.run.harness import SCRIPTED
    from looplab.views import terminal

    stream = choice.stream
    if choice.model == SCRIPTED:
        if choice.api is None and stream is None:
            return runners  # the scripted model speaks every runner's first API
        provider = PROVIDER_OF_API[choice.api] if choice.api else "openai"
        spec = ModelSpec(provider, SCRIPTED, api=choice.api, stream=stream)  # type: ignore[arg-type]
        target = f"--api {choice.api}"
    else:
        provider, name = parse_model(choice.model)
        spec = ModelSpec(provider, name, api=choice.api, stream=stream)  # type: ignore[arg-type]
        target = choice.model + (f" over --api {choice.api}" if choice.api else "")
    kept, refused, unstreamed = [], {}, {}
    for runner in runners:
        try:
            # The rules each runner's `run` applies, read off its declaration: no framework is imported for them.
            if choice.model != SCRIPTED or choice.api is not None:
                RunnerDeclaration.api_for(RUNNERS[runner], spec)  # type: ignore[arg-type]
        except LooplabError as exc:
            refused[runner] = exc
            continue
        try:
            RunnerDeclaration.stream_for(RUNNERS[runner], spec)  # type: ignore[arg-type]
        except LooplabError as exc:
            unstreamed[runner] = exc
        else:
            kept.append(runner)
    if (refused or unstreamed) and not kept:
        raise next(iter({**refused, **unstreamed}.values()))
    if unstreamed:
        who = "it" if len(unstreamed) == 1 else "they"
        mode = "on" if stream else "off"
        terminal.console().print(
            f"skipping {', '.join(unstreamed)}: {who} cannot run with --stream {mode}", style="yellow"
        )
    if refused:
        speak = sorted({", ".join(RUNNERS[r].apis) for r in refused})
        who = "it" if len(refused) == 1 else "they"
        terminal.console().print(
            f"skipping {', '.join(refused)}: {who} cannot take {target} (APIs: {'; '.join(speak)})",
            style="yellow",
        )
    return kept


def prepare_environments(args: argparse.Namespace, runners: list[str]) -> tuple[list[str], Any]:
    """With --isolate or --versions: the runner labels and a lookup of their environments, created now if new."""
    from looplab.run import environments
    from looplab.views import terminal

    if not (args.isolate or args.versions):
        return runners, None
    labels = environments.labels(runners, environments.parse_pins(args.versions or []))
    out = terminal.console()

    def created(env: environments.RunnerEnv) -> None:
        out.print(f"created the {env.spec.label} environment in {env.created_s:.1f} s (first use, kept in {env.path})")

    def creating(spec: environments.EnvSpec, path: Any) -> None:
        out.print(environments.creating_line(spec, path))

    everyone = getattr(args, "isolate_everyone", bool(args.isolate))
    with out.status("preparing runner environments ..."):
        return labels, environments.prepare(labels, created, everyone=everyone, on_creating=creating)
