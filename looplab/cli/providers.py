"""`nox -s providers`: every installed runner on `vip-compound` against a small current model of each provider.

A provider runs when its key variable is set and is skipped, saying which variable is missing, when it
is not; with no key at all nothing runs and the session still passes (CI has no keys). The models are
priced from the shipped table, so the report's cost is in dollars.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from looplab.adapters.contract.model import KEY_VARIABLES, key_from, missing_key

#: A small, cheap current model of each provider (each in adapters/contract/prices.json).
SMALL_MODELS = {"openai": "gpt-4.1-mini", "anthropic": "claude-haiku-4-5", "google": "gemini-2.5-flash-lite"}
CASES = ("vip-compound",)


def plan(env: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """The models to run (`provider:name`) and, for each provider left out, why."""
    run, skipped = [], []
    for provider, name in SMALL_MODELS.items():
        if key_from(provider, env):
            run.append(f"{provider}:{name}")
        else:
            skipped.append(f"skipping {provider}:{name}: {missing_key(provider)}")
    return run, skipped


def eval_args(model: str, out: Path) -> list[str]:
    """The `looplab eval` arguments for one model: JSON and HTML under `out`, named after the provider."""
    stem = out / model.split(":", 1)[0]
    cases = [arg for case in CASES for arg in ("--case", case)]
    return ["eval", "--model", model, *cases, "--json", f"{stem}.json", "--html", f"{stem}.html"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run each provider with a key; exit non-zero only when a run could not be made."""
    from looplab import cli  # the CLI package this module sits in: `looplab eval` run in process

    parser = argparse.ArgumentParser(prog="python -m looplab.cli.providers", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("looplab-report/providers"), help="folder for the reports")
    args = parser.parse_args(argv)
    models, skipped = plan(os.environ)
    for line in skipped:
        print(line, flush=True)
    if not models:
        variables = ", ".join(name for names in KEY_VARIABLES.values() for name in names)
        print(f"no provider key is set ({variables}): nothing to run", flush=True)
        return 0
    # Exit 1 means a check failed (a real model may well miss one): that is a finding, in the report.
    # Exit 2 is a run that could not be made (bad key, unreachable provider): that fails the session.
    codes = [cli.main(eval_args(model, args.out)) for model in models]
    return 2 if 2 in codes else 0


if __name__ == "__main__":
    raise SystemExit(main())
