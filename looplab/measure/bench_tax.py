"""The harness tax: what looplab adds to a framework's own loop, from pairs of a bare run and its looplab twin."""

from __future__ import annotations

from typing import TYPE_CHECKING

from looplab.measure.bench_stats import median, median_interval, rounded
from looplab.measure.bench_timing import BareSample, Sample, outside_tools
from looplab.records.measurements import HarnessTax

if TYPE_CHECKING:
    from looplab.adapters.contract.model import Api

#: The runner every other is measured against, always measured.
BASELINE = "handrolled"
#: The wire APIs on which an in-process runner has its model requests pass looplab's recording model proxy: its
#: framework builds its own HTTP client from a base URL (LiteLLM, LlamaIndex's Anthropic LLM), so it is pointed at
#: the proxy. A runner whose loop runs in another process (a node program, the Claude Code CLI) always reaches the
#: model through the proxy; every other request goes through a recorded SDK client or transport
#: (`tests/measure/test_bench.py` checks both against the runs).
VIA_MODEL_PROXY: dict[str, frozenset[Api]] = {
    "openai_agents": frozenset({"messages", "gemini"}),
    "smolagents": frozenset({"messages", "gemini"}),
    "llamaindex": frozenset({"messages"}),
}
#: Runners whose bare loop is no framework's: their ratio is reported, not targeted.
RATIO_NOT_TARGETED = frozenset({BASELINE})


def via_model_proxy(runner: str, api: Api) -> bool:
    """Whether `runner`'s model requests on `api` pass looplab's recording model proxy: always for a loop in another
    process, else where `VIA_MODEL_PROXY` says."""
    from looplab.adapters import registry

    return registry.RUNNERS[runner].out_of_process or api in VIA_MODEL_PROXY.get(runner, frozenset())


def harness_tax(runner: str, api: Api, bare: list[BareSample], looplab: list[Sample]) -> HarnessTax:
    """`runner`'s tax on `api` from its pairs: medians per run for the table; the tax and the added time a turn
    are medians over the pairs (same round)."""
    pairs = list(zip(bare, looplab, strict=True))
    taxes = [outside_tools(lab) / outside_tools(b) - 1 for b, lab in pairs]
    added_ms = [(outside_tools(lab) - outside_tools(b)) / max(lab.turns, 1) * 1000 for b, lab in pairs]
    return HarnessTax(
        runner=runner,
        turns_bare=median([s.turns for s in bare]),
        turns_looplab=median([s.turns for s in looplab]),
        bare_wall_ms=round(median([s.wall_s for s in bare]) * 1000, 2),
        looplab_wall_ms=round(median([s.wall_s for s in looplab]) * 1000, 2),
        tax_wall=round(median([lab.wall_s / b.wall_s - 1 for b, lab in pairs]), 4),
        bare_outside_tools_ms=round(median([s.wall_s - s.tools_s for s in bare]) * 1000, 2),
        looplab_outside_tools_ms=round(median([s.wall_s - s.tools_s for s in looplab]) * 1000, 2),
        tax_outside_tools=round(median(taxes), 4),
        tax_interval=rounded(median_interval(taxes), 4),
        added_ms_per_turn=round(median(added_ms), 3),
        added_ms_interval=rounded(median_interval(added_ms), 3),
        pairs=len(pairs),
        api=api,
        via_proxy=via_model_proxy(runner, api),
        ratio_targeted=runner not in RATIO_NOT_TARGETED,
    )
