"""looplab's exceptions: one root for what is raised on purpose, one for the signals that end a run.

Catch `LooplabException` for anything looplab raises; `LooplabError` is the branch a user fixes, each with a one-line
message that says how. A class that is also a built-in exception keeps that base (in brackets), so a caller's
`except ValueError` still catches it. Classes defined elsewhere name their module, under `looplab.`.

    LooplabException (Exception)          anything looplab raises on purpose
    ├── LooplabError                      a problem the user fixes; its message is one line that says how
    │   ├── MissingExtra (ImportError)    a runner's framework is not installed
    │   ├── FileRefused                   a file looplab will not or cannot read or write
    │   ├── ResultsError                  a results document that cannot be read, resumed from or merged
    │   │   └── MergeRefused              documents that cannot be merged
    │   ├── EnvironmentFailed             a runner environment could not be created
    │   └── HistoryError                  records.history: a kept file unreadable, or measurements unkeepable
    ├── DeclarationError                  adapters.contract.declaration: a runner's declaration cannot be read
    ├── ChildRaised                       the child's loop raised; subclasses are named after its exception
    ├── ChildFailed                       the child wrote no usable outcome
    ├── ServerFailed (RuntimeError)       the model server exited or never answered
    ├── DeadlineTimeout (TimeoutError)    adapters.boundary.proxy: the deadline cut an exchange short
    ├── RunEnded (ConnectionAbortedError) adapters.boundary.proxy: the run ended with an exchange in flight
    ├── AgnoRunFailed                     adapters.runners.agno: Agno returned a run that did not complete
    ├── BadRequest                        scenarios.scripted.server: a request refused with a 400
    ├── TooLarge                          scenarios.scripted.server: a request body over the bound
    ├── MalformedRequest (ValueError)     scenarios.scripted.conversation: a request field of the wrong type
    ├── ToolError                         shared_tools.workspace: a tool could not do what was asked
    ├── PathRefused (PermissionError)     shared_tools.workspace: a path leaves the workspace or names a secret
    ├── ToolFailed                        shared_tools.guard: a tool's failure worded as the model reads it
    ├── ToolHostError                     shared_tools.tool_host: a suite's tools.py cannot be described
    └── RepoRefused (ValueError)          shared_tools.repo_copy: a repository a run will not copy

    LooplabSignal (BaseException)         ends a run or a command through frameworks' `except Exception`
    ├── StopRun                           the budget allows no further model call
    └── Interrupted                       the command received SIGINT or SIGTERM

Both roots are defined in `looplab.shared_tools.errors`, the room every other room may import, and exported here.
Private classes (`_Name`) are a module's own control flow and are not drawn; a private signal still derives from
`LooplabSignal`.
"""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING

from looplab.shared_tools.errors import LooplabException, LooplabSignal

if TYPE_CHECKING:
    from looplab.adapters.contract.limits import StopReason

__all__ = [
    "ChildFailed",
    "ChildRaised",
    "EnvironmentFailed",
    "Interrupted",
    "LooplabError",
    "LooplabException",
    "LooplabSignal",
    "MergeRefused",
    "MissingExtra",
    "ResultsError",
    "ServerFailed",
    "StopRun",
]


class LooplabError(LooplabException):
    """A problem the user can fix; its message is one line that says how."""


class MissingExtra(LooplabError, ImportError):
    """A runner's framework is not installed."""

    def __init__(self, runner: str, extra: str, module: str) -> None:
        super().__init__(f"runner {runner!r} needs {module!r}: pip install 'looplab[{extra}]'")
        self.runner, self.extra, self.module = runner, extra, module


class StopRun(LooplabSignal):  # noqa: N818 - a signal, like KeyboardInterrupt, not an error
    """Raised at the model boundary when the budget allows no further model call.

    A `BaseException` on purpose: SDK retry loops and framework error
    handlers catch `Exception`, and this must end the framework's loop rather
    than be retried or handed to the model.
    """

    def __init__(self, reason: StopReason, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail


class ChildRaised(LooplabException):
    """The child's loop raised; subclasses are named after its exception (see `_raised`)."""


class ChildFailed(LooplabException):
    """The child wrote no usable outcome: it crashed, was killed at its bound, or wrote something else."""


class FileRefused(LooplabError):
    """A file looplab was told to read or write and will not or cannot; the message is one line naming it."""


class ResultsError(LooplabError):
    """A results document that cannot be read, resumed from or merged; the message is one line naming the file."""

    def __init__(self, message: str) -> None:
        # A file name, a key or a value quoted from the file can hold a line break: the message stays one line.
        super().__init__(message.replace("\r", "\\r").replace("\n", "\\n"))


class MergeRefused(ResultsError):
    """Documents that cannot be merged: another schema, one case id with two contents, a cell twice."""


class EnvironmentFailed(LooplabError):
    """A runner environment could not be created; the message names the runner and the step's last line."""


class Interrupted(LooplabSignal):  # noqa: N818 - a signal, like KeyboardInterrupt
    """The command received SIGINT or SIGTERM."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.name = signal.Signals(signum).name
        super().__init__(self.name)

    def note(self, finished: int, total: int) -> str:
        """What an incomplete results file says of itself."""
        return f"interrupted by {self.name} after {finished} of {total} runs"

    @property
    def exit_code(self) -> int:
        """130 for SIGINT, 143 for SIGTERM: the shell's convention."""
        return 128 + self.signum


class ServerFailed(LooplabException, RuntimeError):
    """The model server exited or never answered; the message ends with its log's tail."""
