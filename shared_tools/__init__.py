"""The one tool set every runner uses, the Workspace it works in, and the Guard around it."""

from looplab.shared_tools.faults import Fault, with_faults
from looplab.shared_tools.guard import Approver, Guard, Tool, default_tools, run_clock
from looplab.shared_tools.records import StopSignal, ToolCallRecord
from looplab.shared_tools.workspace import PathRefused, Workspace, tree_fingerprint

__all__ = [
    "Approver",
    "Fault",
    "Guard",
    "PathRefused",
    "StopSignal",
    "Tool",
    "ToolCallRecord",
    "Workspace",
    "default_tools",
    "run_clock",
    "tree_fingerprint",
    "with_faults",
]
