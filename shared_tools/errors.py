"""The two roots of looplab's exceptions; the tree under them is drawn in `looplab.adapters.contract.errors`.

They live here, in the room every other room may import, so that the tools' own exceptions can derive from them too;
callers import them from `looplab.adapters.contract.errors`.
"""

from __future__ import annotations

__all__ = ["LooplabException", "LooplabSignal"]


class LooplabException(Exception):  # noqa: N818 - the root above the errors (`LooplabError`) and the rest
    """Every exception looplab raises on purpose derives from this one."""


class LooplabSignal(BaseException):  # noqa: N818 - a signal, like KeyboardInterrupt, not an error
    """A signal that ends a run or a command: it must pass through frameworks' `except Exception`."""
