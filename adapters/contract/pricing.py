"""What a model call costs: a model's price, and the shipped table of provider prices.

The table (`prices.json` beside this file) is data, taken on the date it
names from the `genai-prices` package's snapshot; `python -m looplab.measure prices`
takes it again. A model the table does not know has no price: its cost is
unknown (`None`), never zero.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["PRICES_FILE", "Pricing", "format_cost", "parse_price", "price_of", "price_table", "total_cost"]

#: The shipped price table.
PRICES_FILE = Path(__file__).with_name("prices.json")

#: A dated release suffix the providers append to a model's name (`-2025-04-14`, `-20250929`).
_DATED = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8})$")


@dataclass(frozen=True)
class Pricing:
    """US dollars per million tokens.

    `cached_input_per_mtok` prices input tokens read from the provider's prompt cache and
    `cache_write_per_mtok` those written to it (Anthropic); when absent they cost as input.
    """

    input_per_mtok: float = 0.0
    output_per_mtok: float = 0.0
    cached_input_per_mtok: float | None = None
    cache_write_per_mtok: float | None = None

    def cost(self, input_tokens: int, output_tokens: int, cached_input: int = 0, cache_write: int = 0) -> float:
        """Dollars for one call; `input_tokens` counts every input token, cached and cache-written ones included."""
        cached_price = self.input_per_mtok if self.cached_input_per_mtok is None else self.cached_input_per_mtok
        write_price = self.input_per_mtok if self.cache_write_per_mtok is None else self.cache_write_per_mtok
        plain = max(input_tokens - cached_input - cache_write, 0)
        return (
            plain * self.input_per_mtok
            + cached_input * cached_price
            + cache_write * write_price
            + output_tokens * self.output_per_mtok
        ) / 1_000_000


def parse_price(text: str) -> Pricing:
    """`IN,OUT` or `IN,OUT,CACHED` dollars per million tokens, e.g. `2,8` or `2,8,0.5`."""
    parts = [p.strip() for p in text.split(",")]
    if len(parts) not in (2, 3):
        raise ValueError(f"{text!r}: give IN,OUT or IN,OUT,CACHED dollars per million tokens, e.g. 2,8 or 2,8,0.5")
    try:
        numbers = [float(p) for p in parts]
    except ValueError:
        raise ValueError(f"{text!r}: prices are numbers of dollars per million tokens, e.g. 2,8") from None
    if any(not 0 <= n < float("inf") for n in numbers):
        raise ValueError(f"{text!r}: prices are finite and not negative")
    return Pricing(*numbers)


@dataclass(frozen=True)
class PriceTable:
    """Prices per provider and model, with the date they were taken and where from."""

    taken: str
    source: str
    models: dict[str, dict[str, Any]]

    def lookup(self, provider: str, name: str) -> Pricing | None:
        """The price of `provider:name`: its id or an alias, then without a dated suffix, then by the longest prefix."""
        models = {k.split(":", 1)[1]: v for k, v in self.models.items() if k.startswith(f"{provider}:")}
        for candidate in dict.fromkeys((name, _DATED.sub("", name))):
            for model_id, entry in models.items():
                if candidate == model_id or candidate in entry.get("aliases", ()):
                    return _pricing(entry)
        matches = [(len(p), e) for e in models.values() for p in e.get("prefixes", ()) if name.startswith(p)]
        return _pricing(max(matches, key=lambda m: m[0])[1]) if matches else None


def _pricing(entry: dict[str, Any]) -> Pricing:
    return Pricing(entry["input"], entry["output"], entry.get("cached_input"), entry.get("cache_write"))


@cache
def price_table() -> PriceTable:
    """The shipped table."""
    data = json.loads(PRICES_FILE.read_text(encoding="utf-8"))
    return PriceTable(taken=data["taken"], source=data["source"], models=data["models"])


def price_of(provider: str, name: str) -> Pricing | None:
    """A model's price from the shipped table, or None when the table does not know it."""
    return price_table().lookup(provider, name)


def format_cost(cost_usd: float | None, places: int = 4) -> str:
    """A cost for people: dollars to `places` decimals, or "unknown" when the model has no price (never 0)."""
    return "unknown" if cost_usd is None else f"{cost_usd:.{places}f}"


def total_cost(costs: Iterable[float | None]) -> float | None:
    """The sum of known costs; None (unknown) if any is unknown."""
    values = list(costs)
    return None if any(c is None for c in values) else sum(c for c in values if c is not None)
