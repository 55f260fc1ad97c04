"""looplab's exceptions, in one place: what a caller catches, and the signals that end a run."""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from looplab.adapters.contract.limits import StopReason

__all__ = [
    "ChildFailed",
    "ChildRaised",
    "EnvironmentFailed",
    "FileRefused",
    "Interrupted",
    "LooplabError",
    "MergeRefused",
    "MissingExtra",
    "ResultsError",
    "ServerFailed",
    "StopRun",
]


class LooplabError(Exception):
    """A problem the user can fix; its message is one line that says how."""


class MissingExtra(LooplabError, ImportError):
    """A runner's framework is not installed."""

    def __init__(self, runner: str, extra: str, module: str) -> None:
        super().__init__(f"runner {runner!r} needs {module!r}: pip install 'looplab[{extra}]'")
        self.runner, self.extra, self.module = runner, extra, module


class StopRun(BaseException):  # noqa: N818 - a signal, like KeyboardInterrupt, not an error
    """Raised at the model boundary when the budget allows no further model call.

    A `BaseException` on purpose: SDK retry loops and framework error
    handlers catch `Exception`, and this must end the framework's loop rather
    than be retried or handed to the model.
    """

    def __init__(self, reason: StopReason, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail


class ChildRaised(Exception):
    """The child's loop raised; subclasses are named after its exception (see `_raised`)."""


class ChildFailed(Exception):
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


class Interrupted(BaseException):  # noqa: N818 - a signal, like KeyboardInterrupt
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


class ServerFailed(RuntimeError):
    """The model server exited or never answered; the message ends with its log's tail."""
