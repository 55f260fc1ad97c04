"""Takes the shipped price table again: `python -m looplab.measure prices` (needs `pip install genai-prices`).

The prices come from `genai-prices` (maintained by the Pydantic team from the
providers' price pages); this writes the OpenAI, Anthropic and Gemini text models of its
bundled snapshot to `adapters/contract/prices.json` with today's date, so looplab itself
needs no network and no extra package to price a run.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from looplab.adapters.contract import files
from looplab.adapters.contract.errors import LooplabError
from looplab.adapters.contract.pricing import PRICES_FILE

PROVIDERS = ("openai", "anthropic", "google")
#: The models of a provider that its own API serves, by how their ids begin: genai-prices' `google` also prices
#: Claude and Gemma as Vertex AI serves them, and looplab's `google:` is Gemini's API.
SERVED = {"google": ("gemini-",)}
#: Models priced per token but not for text in and text out (speech, images, search, fine-tunes, embeddings,
#: the Live API's streaming sessions).
NOT_TEXT = (
    "tts",
    "audio",
    "image",
    "search",
    "transcribe",
    "embedding",
    "moderation",
    "ft:",
    "whisper",
    "realtime",
    "live",
    "nano-banana",
)


def _base(price: Any) -> float | None:
    """A price, or the base of a tiered price (tiers start at 200k+ input tokens, past any looplab prompt)."""
    value = getattr(price, "base", price)
    return None if value is None else float(value)


def snapshot(today: date | None = None) -> dict[str, Any]:
    """The table as JSON data, from the installed genai-prices."""
    try:
        from genai_prices import data
    except ImportError:
        raise SystemExit("taking prices needs genai-prices: pip install genai-prices") from None
    now = datetime.now(UTC)
    models: dict[str, Any] = {}
    for provider in (p for p in data.providers if p.id in PROVIDERS):
        for model in provider.models:
            prices = model.get_prices(now)
            entry = {"input": _base(prices.input_mtok), "output": _base(prices.output_mtok)}
            if model.deprecated or None in entry.values() or any(word in model.id for word in NOT_TEXT):
                continue
            if not model.id.startswith(SERVED.get(provider.id, "")):
                continue
            if (cached := _base(prices.cache_read_mtok)) is not None:
                entry["cached_input"] = cached
            if (write := _base(prices.cache_write_mtok)) is not None:
                entry["cache_write"] = write
            clauses = getattr(model.match, "or_", [model.match])
            if aliases := sorted(c.equals for c in clauses if hasattr(c, "equals")):
                entry["aliases"] = aliases
            if prefixes := sorted(c.starts_with for c in clauses if hasattr(c, "starts_with")):
                entry["prefixes"] = prefixes
            models[f"{provider.id}:{model.id}"] = entry
    return {
        "taken": (today or now.date()).isoformat(),
        "source": f"genai-prices {importlib.metadata.version('genai-prices')}",
        "unit": "US dollars per million tokens; tiered prices at their base tier",
        "models": dict(sorted(models.items())),
    }


def dumps(table: dict[str, Any]) -> str:
    """The table as JSON with one model per line, so a price change is a one-line diff."""
    head = {k: v for k, v in table.items() if k != "models"}
    lines = [f" {json.dumps(k)}: {json.dumps(v)}" for k, v in head.items()]
    models = [f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in table["models"].items()]
    return "{\n" + ",\n".join([*lines, ' "models": {\n' + ",\n".join(models) + "\n }"]) + "\n}\n"


def main(argv: list[str] | None = None) -> None:
    """Write the table (to adapters/contract/prices.json unless told otherwise)."""
    parser = argparse.ArgumentParser(prog="python -m looplab.measure prices", description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--out", type=Path, default=PRICES_FILE)
    args = parser.parse_args(argv)
    try:
        files.ready_to_write(args.out)
        table = snapshot()
        files.write_text(args.out, dumps(table))
    except LooplabError as exc:
        raise SystemExit(f"looplab.measure.prices: {exc}") from None
    print(f"{len(table['models'])} models from {table['source']}, taken {table['taken']}: {args.out}")


if __name__ == "__main__":
    main()
