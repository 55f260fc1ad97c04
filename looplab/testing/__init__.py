"""Testing runners: one run against a scripted policy (`runs`), and the conformance checks as a pytest plugin
(`conformance`) that a package shipping its own runner runs against it."""
