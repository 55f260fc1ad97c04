"""looplab: one ReAct investigation through many agent runners, with one normalized record.

Nineteen runners and your own agent (Python frameworks, hand-rolled loops and TypeScript programs, in this
process or in their own) work the same cases with the same tools behind one Guard, and every model call passes one
recording boundary, so `max_steps` means the same thing for every runner and their traces compare.
The default model is a scripted investigator served over loopback HTTP: offline and deterministic.

Where things live (everything is under this one import name):

- `looplab.adapters`: the runners and their two boundaries. `contract` is the leaf every part may import
  (limits, stop reasons, result and trace records, errors); `boundary` the model recorder and proxy, the
  MCP tool server and runner processes; `runners` one module per runner; `registry` the runners by name.
- `looplab.shared_tools`: the tool set, the Workspace a run works in and the Guard around the tools.
- `looplab.scenarios`: the cases (the built-in `invoice_discount` suite) and the scripted model.
- `looplab.run`: the harness (one case through one runner), the matrix, runner environments.
- `looplab.records`, `looplab.views`, `looplab.measure`, `looplab.cli`: the results document, what shows
  it (terminal, HTML report, scorecard, OpenTelemetry), the measurements, and the `looplab` command.

One case through one runner, against the scripted model::

    import looplab

    case = looplab.load_cases()["vip-compound"]
    with looplab.endpoint(looplab.ModelChoice()) as where:
        outcome = looplab.run_one("handrolled", case, where)
    print(outcome.result.stop_reason if outcome.result else outcome.error)

`looplab.start` runs one in the background instead: its handle's `cancel()`, from any thread or task, ends the
run as `cancelled` within a second, with its partial trace (`await handle` or `handle.outcome()` waits for it).

The names below are imported on first use, so importing a part of looplab (as every runner process
does with `looplab.adapters.contract`) loads neither the harness nor any framework.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from looplab.adapters.contract.errors import LooplabError, LooplabException, MissingExtra
    from looplab.adapters.contract.limits import Limits, StopReason
    from looplab.adapters.contract.model import ModelSpec
    from looplab.adapters.contract.result import RunResult
    from looplab.adapters.registry import load as load_runner
    from looplab.records.outcome import RunOutcome
    from looplab.run.handle import RunHandle, start
    from looplab.run.harness import Endpoint, ModelChoice, endpoint, run_one
    from looplab.run.options import RunOptions
    from looplab.scenarios.cases import Case, load_cases

#: Public name -> (module, attribute): what `__getattr__` imports when the name is first used.
_LAZY: dict[str, tuple[str, str]] = {
    "Case": ("looplab.scenarios.cases", "Case"),
    "Endpoint": ("looplab.run.harness", "Endpoint"),
    "Limits": ("looplab.adapters.contract.limits", "Limits"),
    "LooplabError": ("looplab.adapters.contract.errors", "LooplabError"),
    "LooplabException": ("looplab.adapters.contract.errors", "LooplabException"),
    "MissingExtra": ("looplab.adapters.contract.errors", "MissingExtra"),
    "ModelChoice": ("looplab.run.harness", "ModelChoice"),
    "ModelSpec": ("looplab.adapters.contract.model", "ModelSpec"),
    "RunOutcome": ("looplab.records.outcome", "RunOutcome"),
    "RunHandle": ("looplab.run.handle", "RunHandle"),
    "RunOptions": ("looplab.run.options", "RunOptions"),
    "RunResult": ("looplab.adapters.contract.result", "RunResult"),
    "StopReason": ("looplab.adapters.contract.limits", "StopReason"),
    "endpoint": ("looplab.run.harness", "endpoint"),
    "load_cases": ("looplab.scenarios.cases", "load_cases"),
    "load_runner": ("looplab.adapters.registry", "load"),
    "run_one": ("looplab.run.harness", "run_one"),
    "start": ("looplab.run.handle", "start"),
}

#: Shown when looplab runs from a checkout that was never installed (no distribution metadata to read).
UNKNOWN_VERSION = "0+unknown"

__all__ = [
    "Case",
    "Endpoint",
    "Limits",
    "LooplabError",
    "LooplabException",
    "MissingExtra",
    "ModelChoice",
    "ModelSpec",
    "RunHandle",
    "RunOptions",
    "RunOutcome",
    "RunResult",
    "StopReason",
    "__version__",
    "endpoint",
    "load_cases",
    "load_runner",
    "run_one",
    "start",
]


def _version() -> str:
    """The installed distribution's version; importlib.metadata is imported only when it is asked for."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("looplab")
    except PackageNotFoundError:
        return UNKNOWN_VERSION


def __getattr__(name: str) -> Any:
    """Import a public name on first use (PEP 562) and keep it in the module, so later uses cost nothing."""
    if name == "__version__":
        value: Any = _version()
    elif name in _LAZY:
        module, attribute = _LAZY[name]
        value = getattr(importlib.import_module(module), attribute)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
