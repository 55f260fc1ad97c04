"""The checks every looplab runner passes, run against this package's runner (the one it ships, by default)."""

from looplab.testing.conformance import *  # noqa: F403
