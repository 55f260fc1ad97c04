"""One Limits, one behaviour: every runner against the same scripted policies (`looplab.testing.conformance`).

The checks are the plugin's, which a package shipping its own runner runs too. In the fast tier each runner runs
the four contract checks on its first wire API; `pytest --full` runs every check on every wire API.
"""

from looplab.testing.conformance import *  # noqa: F403 - the checks are collected here
