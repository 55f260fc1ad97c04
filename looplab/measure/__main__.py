"""`python -m looplab.measure COMMAND [OPTIONS]`: the measurements that are not `looplab` commands.

The caps doc and the bench are `looplab caps` and `looplab bench`; these are the rest, each with its own options
(`python -m looplab.measure COMMAND --help`). A command's module is imported only when it runs, so the release
check needs nothing of looplab's dependencies but `packaging`, and a fresh interpreter of the bench starts light.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

#: Each command: the module whose `main(argv)` runs it, and what it does.
COMMANDS: dict[str, tuple[str, str]] = {
    "bench-intervals": (
        "looplab.measure.bench_intervals",
        "what the intervals and paired comparisons over repeats add to a report of the full matrix",
    ),
    "bench-merge": ("looplab.measure.bench_merge", "how long merging a sharded full matrix takes"),
    "bench-probe": (
        "looplab.measure.bench_probe",
        "one runner's import time and peak memory in this fresh interpreter (`looplab bench` starts it)",
    ),
    "bench-workspace": ("looplab.measure.bench_workspace", "what a run's copy of a repository costs"),
    "caps-runner": (
        "looplab.measure.caps",
        "one runner's caps measured in this interpreter, to a JSON file (`looplab caps` starts it in an environment)",
    ),
    "local-llm": (
        "looplab.measure.local_llm",
        "a real LLM, offline: the Chat Completions runners against Gemma 3 270M (`nox -s local-llm`)",
    ),
    "prices": ("looplab.measure.prices", "take the shipped price table again (needs `pip install genai-prices`)"),
    "real-model-notes": ("looplab.measure.real_model_notes", "write docs/real-model-notes.md from a results document"),
    "release-check": ("looplab.measure.release_check", "build and check the release artifacts (`nox -s release`)"),
}


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command `argv` names with the rest of `argv`; its exit code, 0 for none."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in COMMANDS:
        module = importlib.import_module(COMMANDS[args[0]][0])
        return module.main(args[1:]) or 0
    listed = "\n".join(f"  {name:<18}{what}" for name, (_, what) in COMMANDS.items())
    parser = argparse.ArgumentParser(
        prog="python -m looplab.measure",
        description="The measurements that are not `looplab` commands; each has its own options (COMMAND --help).",
        epilog=f"commands:\n{listed}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("command", metavar="COMMAND", choices=list(COMMANDS), help="one of the commands below")
    parser.parse_args(args[:1])  # prints the help, or says what is wrong with the command, and exits
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
