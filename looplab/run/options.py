"""How every run of a command runs: one typed value, made once from the command line and carried to each run.

The value travels as it is to the threads of this process and (pickled) to worker processes; to a lane of a
runner environment it crosses as JSON, one object of its fields (`to_wire`, `from_wire`), the same keyword form
`run_one` takes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from looplab.adapters.contract.model import ToolTransport
from looplab.shared_tools import Approver

__all__ = ["RunOptions"]

#: How long a run still going after its `max_seconds` may take before it is abandoned as hung.
DEFAULT_GRACE_S = 30.0


@dataclass(frozen=True)
class RunOptions:
    """What a command asks of every run, over what each case sets (its limits, its tools, its model)."""

    #: Model calls a run may make, in place of the case's `max_steps` (`--max-steps`); None keeps the case's.
    max_steps: int | None = None
    #: Tokens a run may spend (input plus output), in place of the case's `max_tokens`; None keeps the case's.
    max_tokens: int | None = None
    #: Asked before each effect tool runs (`Guard`); None: the Guard's own rule. It cannot leave this process.
    approver: Approver | None = None
    #: Seconds a run may go on past its `max_seconds` before it is abandoned as hung.
    grace_s: float = DEFAULT_GRACE_S
    #: How in-process runners reach the tools: called here, or as MCP clients of a tool server (`--tools`).
    tools: ToolTransport = "in-process"
    #: Whether the team's code (its test command, its own tools) runs in a sandbox (`--sandbox`).
    sandbox: bool = False

    @classmethod
    def of(cls, options: RunOptions | Mapping[str, Any] | None = None, **given: Any) -> RunOptions:
        """`options` (a `RunOptions`, or its fields by name) with `given` fields over it; a name that is no field of
        these options is a `TypeError`, as an unknown keyword argument is."""
        base = options if isinstance(options, RunOptions) else cls(**dict(options or {}))
        return dataclasses.replace(base, **given) if given else base

    def to_wire(self) -> dict[str, Any]:
        """These options as the JSON object a runner environment's lane reads: the fields asked for (those that
        differ from the defaults), by name, as `run_one` takes them."""
        if self.approver is not None:
            raise TypeError("an approver is code of this process: it cannot cross to a runner environment's lane")
        return {f.name: value for f in dataclasses.fields(self) if (value := getattr(self, f.name)) != f.default}

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> RunOptions:
        """The options a lane was sent (`to_wire`)."""
        return cls.of(data)
