"""The runners under test, and one run of a runner against a scripted policy (`looplab.testing.runs`)."""

from __future__ import annotations

from looplab.testing.runs import default_runners, run_runner, runners_from_environment, tool_steps

__all__ = ["ALL_RUNNERS", "run_runner", "tool_steps"]

#: The runners under test: those that run here by default, or those named in LOOPLAB_RUNNERS (comma-separated),
#: as the per-adapter nox sessions do when only one framework is installed. (`external` needs a command:
#: tests/test_external_runner.py gives it one; a runner that cannot share this environment runs these tests in its
#: own: tests/test_own_environments.py.)
ALL_RUNNERS = runners_from_environment() or default_runners()
#: The runners that reach Gemini through something other than google-genai (LiteLLM, lm15, the TypeScript providers):
#: these retry a reply that breaks off, as on their other wire APIs; google-genai retries none, streamed or not.
GEMINI_RETRIES_A_BROKEN_REPLY = frozenset({"openai_agents", "smolagents", "dspy", "ts_ai_sdk", "ts_langgraph"})
