"""The one tool set every runner uses, a suite's own tools, the Workspace they work in, and the Guard around them."""

from looplab.shared_tools.faults import Fault, with_faults
from looplab.shared_tools.guard import BUILTIN_TOOLS, Approver, Guard, Tool, builtin_tool, default_tools, run_clock
from looplab.shared_tools.records import ToolCallRecord
from looplab.shared_tools.workspace import PathRefused, Workspace, tree_fingerprint

__all__ = [
    "Approver",
    "BUILTIN_TOOLS",
    "Fault",
    "Guard",
    "PathRefused",
    "Tool",
    "ToolCallRecord",
    "Workspace",
    "builtin_tool",
    "default_tools",
    "run_clock",
    "tree_fingerprint",
    "with_faults",
]
