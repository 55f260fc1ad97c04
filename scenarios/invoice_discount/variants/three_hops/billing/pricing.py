"""Pricing: from invoice lines to the amount due, discounts included."""

from collections.abc import Iterable
from decimal import Decimal

from billing.discount import apply_discount


def price_lines(lines: Iterable, tier: str) -> Decimal:
    """The amount due for `lines` for a customer of `tier`."""
    subtotal = sum((line.amount() for line in lines), Decimal("0"))
    return apply_discount(subtotal, tier)
