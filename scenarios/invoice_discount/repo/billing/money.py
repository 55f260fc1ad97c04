"""Money helpers: every amount is a Decimal rounded to cents."""

from decimal import ROUND_HALF_UP, Decimal

CENT = Decimal("0.01")


def to_cents(amount: Decimal) -> Decimal:
    """Round an amount to whole cents, half up, as invoices print it."""
    return amount.quantize(CENT, rounding=ROUND_HALF_UP)
