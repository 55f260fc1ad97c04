"""`--runner external`: any command as a runner, under the contract in `adapters/runners/_child.py`.

The command comes from `looplab run/eval --cmd '...'` (or the `LOOPLAB_EXTERNAL_CMD` variable, which
the CLI sets so worker processes see it too); it is split like a shell line, not run by a shell. It runs
in the working directory looplab was started in (worker processes keep it), so `python agent.py` or
`./agent` means there, as in the shell it was typed in; the outcome file and anything of looplab's stay
in the run's scratch folder.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from looplab.adapters.contract.errors import LooplabError
from looplab.adapters.contract.limits import Limits
from looplab.adapters.contract.model import Api, ModelSpec
from looplab.adapters.contract.result import NativeCap
from looplab.adapters.runners._child import ChildRunner
from looplab.adapters.session import RunSession

__all__ = ["EXTERNAL_COMMAND_ENV", "RUNNER"]

#: Where `--runner external` reads its command (the CLI sets it from `--cmd`; worker processes inherit it).
EXTERNAL_COMMAND_ENV = "LOOPLAB_EXTERNAL_CMD"


class External(ChildRunner):
    name = "external"
    summary = "any command (--cmd): the model through a recording proxy, the tools over MCP"
    requires = ("mcp",)
    by_default = False
    listed = 140
    extra = "mcp"
    distribution = "looplab"
    apis: tuple[Api, ...] = ("chat", "responses", "messages")
    knobs = ("LOOPLAB_CAP",)  # the agent's own loop bound, which it reads from its environment

    def command(self, session: RunSession | None = None) -> list[str]:
        text = os.environ.get(EXTERNAL_COMMAND_ENV, "").strip()
        if not text:
            raise LooplabError(f"runner 'external' needs a command: --cmd 'COMMAND ...' (or {EXTERNAL_COMMAND_ENV})")
        return shlex.split(text)

    def workdir(self) -> Path:
        """The working directory looplab was started in: a relative path in the command means what it meant there."""
        return Path.cwd()

    def version(self, model: ModelSpec | None = None) -> str:
        return f"command: {os.environ.get(EXTERNAL_COMMAND_ENV, '').strip() or 'none'}"

    def native_cap(self, limits: Limits) -> NativeCap:
        return NativeCap(knob=self.knobs[0], value=limits.max_steps)


RUNNER = External()
