"""The two instrumented edges of a run, knowing no runner: the model (the recorder, the run's budget, the SDK
clients that record, the proxy, pacing) and the tools (the MCP tool server and client), plus how a runner process
is started and bounded."""
