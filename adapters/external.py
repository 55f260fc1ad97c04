"""`--runner external`: any command as a runner, under the contract in `adapters/child.py`.

The command comes from `looplab run/eval --cmd '...'` (or the `LOOPLAB_EXTERNAL_CMD` variable, which
the CLI sets so worker processes see it too); it is split like a shell line, not run by a shell.
"""

from __future__ import annotations

import os
import shlex

from adapters import EXTERNAL_COMMAND_ENV as COMMAND_ENV
from adapters.base import Api, Limits, LooplabError, ModelSpec, NativeCap, RunSession
from adapters.child import ChildRunner


class External(ChildRunner):
    name = "external"
    extra = "mcp"
    distribution = "looplab"
    apis: tuple[Api, ...] = ("chat", "responses", "messages")
    knobs = ("LOOPLAB_CAP",)  # the agent's own loop bound, which it reads from its environment

    def command(self, session: RunSession | None = None) -> list[str]:
        text = os.environ.get(COMMAND_ENV, "").strip()
        if not text:
            raise LooplabError(f"runner 'external' needs a command: --cmd 'COMMAND ...' (or {COMMAND_ENV})")
        return shlex.split(text)

    def version(self, model: ModelSpec | None = None) -> str:
        return f"command: {os.environ.get(COMMAND_ENV, '').strip() or 'none'}"

    def native_cap(self, limits: Limits) -> NativeCap:
        return NativeCap(knob=self.knobs[0], value=limits.max_steps)


ADAPTER = External()
