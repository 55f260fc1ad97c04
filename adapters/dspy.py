"""DSPy: `dspy.ReAct` over the Guard's tools, the model's next step written as text fields.

DSPy asks the model for `next_thought`, `next_tool_name` and `next_tool_args` as `[[ ## field ## ]]`
text (ChatAdapter; after a reply it cannot parse it asks once more in JSON, JSONAdapter), not as
native tool calls. DSPy builds its own HTTP client and takes no client object, so the model is
reached through the run's recording proxy (`ModelProxy`): Chat Completions (`openai/<model>`) or
Anthropic Messages (`anthropic/<model>`).

The cap, `ReAct(max_iters=N)`, counts react steps, each one model call (measured). At the cap
ReAct returns without raising, and then makes one more model call, the *extract* (a
ChainOfThought that writes the signature's `answer` from the trajectory): N+1 calls. It also
extracts after the model picks `finish`. The mapping: `max_iters=max_steps`; when the model
picks `finish`, the thought it finishes with is the answer (the instructions ask for that) and
the extract call is skipped, so an answer on call k is k calls; at the cap the extract call is
the (N+1)th, which the model boundary refuses: the run ends `max_steps`, no answer. The partial
history is the prediction's `trajectory` (lost when the extract is refused: the boundaries keep it).

Measured with the sloppy model: `next_tool_args` that is not JSON is repaired by DSPy (json_repair)
before any tool sees it; a wrong type or a missing argument reaches the Guard (`_RawTool`), which
answers with an error observation; a tool name outside the offered ones fails DSPy's parse, its
JSON retry fails too, and `AdapterParseError` ends the run (`error`). A tool that raises becomes
the observation `Execution error in <tool>: ...` (the Guard never raises). One tool per step.
"""

from __future__ import annotations

import inspect
import itertools
import os
import re
from collections.abc import Iterator, Sequence
from typing import Any

# DSPy reads its model price map once, on first use, from GitHub unless this is set (no per-run switch).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
import dspy  # noqa: E402
from dspy.utils.callback import BaseCallback  # noqa: E402

from adapters.bare import BareTool  # noqa: E402
from adapters.base import SYSTEM_PROMPT, Adapter, Finished, KnobDefault, Limits, NativeCap, RunSession  # noqa: E402
from adapters.proxy import ModelProxy  # noqa: E402

KNOB = "dspy.ReAct(max_iters=)"
FINISH = "finish"
INSTRUCTIONS = f"{SYSTEM_PROMPT} When you call finish, write your whole answer as that step's next_thought."
#: The tool a reply names, in the field format or in the JSON one.
TOOL_NAMED = re.compile(r'\[\[ ## next_tool_name ## \]\]\s*(\S+)|"next_tool_name"\s*:\s*"([^"]*)"')


class _ReAct(dspy.ReAct):
    """DSPy's ReAct, except that a `finish` step's thought is the answer: no extract call restates it."""

    def _call_with_potential_trajectory_truncation(self, module: Any, trajectory: dict[str, Any], **inputs: Any) -> Any:
        last = len(trajectory) // 4 - 1  # each step: thought, tool_name, tool_args, observation
        if module is self.extract and trajectory.get(f"tool_name_{last}") == FINISH:
            return dspy.Prediction(answer=trajectory[f"thought_{last}"])
        return super()._call_with_potential_trajectory_truncation(module, trajectory, **inputs)


class _RawTool(dspy.Tool):
    """A `dspy.Tool` that passes the model's arguments on unchecked: the Guard validates them, as an observation."""

    def _validate_and_parse_args(self, **kwargs: Any) -> dict[str, Any]:
        return kwargs


class _ToolNames(BaseCallback):
    """Puts on each recorded model call the tool its reply named (`finish` is the answer, not a tool).

    DSPy's tool requests are text, which the recorder does not read as tool calls. An LM call's span on
    the run's clock pairs its reply with its record (the proxy writes the record after replying).
    """

    def __init__(self, session: RunSession) -> None:
        self.session, self.started, self.replies = session, dict[str, float](), list[tuple[float, float, str]]()

    def on_lm_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        self.started[call_id] = self.session.clock()

    def on_lm_end(self, call_id: str, outputs: Any, exception: BaseException | None = None) -> None:
        start = self.started.pop(call_id, None)
        if start is not None and outputs and (named := TOOL_NAMED.search(str(outputs[0]))):
            self.replies.append((start, self.session.clock(), named[1] or named[2]))

    def name_tools(self) -> None:
        for start, end, tool in self.replies:
            for call in self.session.recorder.calls:
                if start <= call.started_at <= end and tool != FINISH:
                    call.tool_calls_requested = [tool]


def _agent(tools: list[dspy.Tool], max_iters: int | None) -> _ReAct:
    signature = dspy.Signature("task -> answer", INSTRUCTIONS)
    return _ReAct(signature, tools=tools, **({} if max_iters is None else {"max_iters": max_iters}))


class DSPy(Adapter):
    """Runner `dspy`: `dspy.ReAct`, capped by `max_iters`."""

    name = "dspy"
    extra = "dspy"
    distribution = "dspy"
    apis = ("chat", "messages")
    knobs = (KNOB,)

    def native_cap(self, limits: Limits) -> NativeCap:
        """`max_iters` counts react steps (one model call each); the extract call after them is refused."""
        return NativeCap(knob=KNOB, value=limits.max_steps)

    def knob_defaults(self) -> dict[str, KnobDefault]:
        default = inspect.signature(dspy.ReAct.__init__).parameters["max_iters"].default
        return {KNOB: KnobDefault(value=default, source="dspy.ReAct.__init__(max_iters=) default")}

    def loop(self, task: str, session: RunSession) -> Finished:
        """Run the agent once; a refused model call (the cap, a Guard stop) propagates as the LM's error."""
        api = self.api_for(session.model)
        ids = itertools.count(1)
        schema = "properties"  # DSPy lists a tool's arguments as name -> JSON schema
        tools = [
            _RawTool(_guarded(t.name, session, ids), name=t.name, desc=t.description, args=t.parameters.get(schema, {}))
            for t in session.tools.tools
        ]
        names = _ToolNames(session)
        with ModelProxy(session) as proxy:
            provider = "anthropic" if api == "messages" else "openai"
            # Per LM: no response cache (disk or memory); the run's retries and deadline; DSPy's own HTTP
            # engine (lm15) whatever OPENAI_BASE_URL says (under "auto" that variable switches to LiteLLM).
            lm = dspy.LM(
                f"{provider}/{session.model.name}",
                api_base=proxy.anthropic_base_url if provider == "anthropic" else proxy.openai_base_url,
                api_key=proxy.token,
                cache=False,
                num_retries=session.model.retries,
                timeout=session.limits.max_seconds,
                engine="lm15",
                callbacks=[names],
            )
            # cap:begin
            agent = _agent(tools, max_iters=session.cap)
            # cap:end
            try:
                with dspy.context(lm=lm, adapter=dspy.ChatAdapter()):  # per run, not dspy.configure: runs overlap
                    prediction = agent(task=task)
            except Exception:
                if session.stop:  # the refused call surfaced as the LM's error; the refusal is what ended it
                    raise session.stop from None
                raise
            finally:
                lm.close()
                names.name_tools()
        return session.conclude(prediction.answer)


def _guarded(name: str, session: RunSession, ids: Iterator[int]) -> Any:
    """The tool body: the Guard, with the arguments DSPy parsed from `next_tool_args` (a dict) as they are."""

    def call(**kwargs: Any) -> str:
        # DSPy gives tool calls no ids: number them, so a call has the same id in process and over MCP.
        return session.tools.call(name, kwargs, f"dspy-{next(ids)}").result  # DSPy has no is_error: the text says

    return call


def bare_run(task: str, tools: Sequence[BareTool], urls: dict[str, str], model: str, max_steps: int) -> int:
    """The same agent on a plain LM and plain tool functions; returns the model requests it made."""
    lm = dspy.LM(f"openai/{model}", api_base=urls["openai"], api_key="not-needed", cache=False, engine="lm15")
    plain = [dspy.Tool(t.fn, name=t.name, desc=t.description, args=t.parameters.get("properties", {})) for t in tools]
    try:
        with dspy.context(lm=lm, adapter=dspy.ChatAdapter()):
            _agent(plain, max_iters=max_steps)(task=task)
    finally:
        lm.close()
    return len(lm.history)


ADAPTER = DSPy()
