"""looplab's conformance checks, as a plugin."""

pytest_plugins = ["looplab.testing.conformance"]
