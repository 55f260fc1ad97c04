"""DSPy: `dspy.ReAct` over the Guard's tools, the model's next step written as text fields.

DSPy asks the model for `next_thought`, `next_tool_name` and `next_tool_args` as `[[ ## field ## ]]`
text (ChatAdapter; after a reply it cannot parse it asks once more in JSON, JSONAdapter), not as native
tool calls: one tool a step (`DSPy.tools_named_in_text` reads it for the recorder). DSPy takes an
engine object: its own lm15 engine, on an HTTP transport whose every request passes the run's recorder
(adapters/runners/_lm15.py), speaking Chat Completions (`openai/<model>`), Anthropic Messages (`anthropic/<model>`)
or Gemini's generateContent (`gemini/<model>`). Replies come whole, or streamed with `--stream on`: DSPy's
`dspy.streamify` around the agent (`_dspy.predict`), which sends each call through the engine's stream (with usage).

`max_iters=max_steps`. A `finish` step's thought is the answer (the instructions ask for that), so no
*extract* call restates it, and the extract call ReAct makes after the cap is refused at the model
boundary: the run ends `max_steps` (what ReAct counts and does at its cap, the same on every API:
docs/iteration-caps.md).

Measured with the sloppy model: `next_tool_args` that is not JSON is repaired by DSPy (json_repair)
before any tool sees it; a wrong type or a missing argument reaches the Guard (`_RawTool`); a tool
name outside the offered ones fails DSPy's parse and its JSON retry: `AdapterParseError` ends the
run (`error`).
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Sequence

from looplab.adapters.runners._litellm import offline_price_map

offline_price_map()  # before DSPy imports LiteLLM, which would read its model price map from GitHub
import dspy  # noqa: E402

from looplab.adapters.contract.bare import BareRun, BareTool  # noqa: E402
from looplab.adapters.contract.limits import Limits  # noqa: E402
from looplab.adapters.contract.result import Finished, NativeCap  # noqa: E402
from looplab.adapters.contract.runner import KnobDefault, signature_default  # noqa: E402
from looplab.adapters.runners._dspy import FINISH, delegating_tool, guarded_tool, predict, react_agent  # noqa: E402
from looplab.adapters.runners._lm15 import LM15_PROVIDER, RecordedTransport, engine, lm15_base_url  # noqa: E402
from looplab.adapters.session import Runner, RunSession  # noqa: E402

__all__ = ["RUNNER"]

KNOB = "dspy.ReAct(max_iters=)"
#: The tool a reply names in ReAct's `next_tool_name` field, in the field format (ChatAdapter) or the JSON one
#: (JSONAdapter).
NEXT_TOOL_NAME = re.compile(r'\[\[ ## next_tool_name ## \]\]\s*(\S+)|"next_tool_name"\s*:\s*"([^"]*)"')


class DSPy(Runner):
    """Runner `dspy`: `dspy.ReAct`, capped by `max_iters`."""

    name = "dspy"
    summary = "DSPy ReAct: tool and arguments as text fields (max_iters)"
    requires = ("dspy",)
    one_tool_a_reply = True
    listed = 100
    extra = "dspy"
    distribution = "dspy"
    apis = ("chat", "messages", "gemini")
    streams = (False, True)
    knobs = (KNOB,)
    delegation = "a Tool whose function runs another ReAct: its own max_iters; the parent counts the call as one"
    delegation_gaps = {
        "parallel": "a ReAct step names one tool (next_tool_name, a Literal of the names) and calls only it",
    }

    def native_cap(self, limits: Limits) -> NativeCap:
        """`max_iters` counts react steps (one model call each); the extract call after them is refused."""
        return NativeCap(knob=KNOB, value=limits.max_steps)

    def knob_defaults(self) -> dict[str, KnobDefault]:
        return {KNOB: signature_default(dspy.ReAct.__init__, "max_iters")}

    def tools_named_in_text(self, text: str) -> list[str]:
        """The tool a reply's `next_tool_name` field names (none for `finish`): ReAct's tool calls are text."""
        if (named := NEXT_TOOL_NAME.search(text)) and (tool := named[1] or named[2]) != FINISH:
            return [tool]
        return []

    def loop(self, task: str, session: RunSession) -> Finished:
        """Run the agent once; a refused model call (the cap, a Guard stop) propagates as the LM's error."""
        provider = LM15_PROVIDER[self.api_for(session.model)]
        ids = itertools.count(1)
        tools = [guarded_tool(t, session, ids) for t in session.tools.tools]
        if session.delegate is not None:  # the child: the same LM (the run's `dspy.context`) and tools; the
            # delegates' own max_iters (None: ReAct's default)
            tools = [*tools, delegating_tool(session.delegate, tools, session.child_cap, session)]
        _agent = functools.partial(react_agent, system_prompt=session.system_prompt)  # this run's agent builder
        base_url = lm15_base_url(provider, session.model.base_url)
        recorded = engine(provider, base_url, session.model.key(), RecordedTransport(session))
        with recorded as lm15:  # no response cache (disk or memory); the run's retries
            lm = dspy.LM(
                f"{provider}/{session.model.name}", engine=lm15, cache=False, num_retries=session.model.retries
            )
            # cap:begin
            agent = _agent(tools, max_iters=session.cap)
            # cap:end
            try:
                with dspy.context(lm=lm, adapter=dspy.ChatAdapter()):  # per run, not dspy.configure: runs overlap
                    prediction = predict(agent, session.model.stream, task=task)
            except Exception:
                if session.stop:  # the refused call surfaced as the LM's error; the refusal is what ended it
                    raise session.stop from None
                raise
        return session.conclude(prediction.answer)

    def bare_loop(self) -> BareRun:
        return bare_run


def bare_run(
    task: str, tools: Sequence[BareTool], urls: dict[str, str], model: str, max_steps: int, *, system_prompt: str
) -> int:
    """The same agent on a plain LM and plain tool functions; returns the model requests it made."""
    plain = [dspy.Tool(t.fn, name=t.name, desc=t.description, args=t.parameters.get("properties", {})) for t in tools]
    with engine("openai", urls["openai"], "not-needed") as lm15:
        lm = dspy.LM(f"openai/{model}", engine=lm15, cache=False)
        with dspy.context(lm=lm, adapter=dspy.ChatAdapter()):
            react_agent(plain, max_steps, system_prompt=system_prompt)(task=task)
    return len(lm.history)


RUNNER = DSPy()
