"""The shared contract: what every room may import, and which imports nothing of looplab above it."""
