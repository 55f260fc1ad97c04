"""The two instrumented edges of a run, knowing no runner: the model (recorder, proxy, pacing) and the tools
(the MCP tool server and client), plus how a runner process is started and bounded."""
