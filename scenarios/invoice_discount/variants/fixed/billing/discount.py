"""Customer discounts.

Every customer gets the base discount; VIP customers get an extra
discount on top of it, for a combined rate of 10%.
"""

from decimal import Decimal

from billing.money import to_cents

BASE_RATE = Decimal("0.05")
VIP_EXTRA_RATE = Decimal("0.05")


def apply_discount(amount: Decimal, tier: str) -> Decimal:
    """Return `amount` after the discounts for customer `tier`."""
    rate = BASE_RATE + (VIP_EXTRA_RATE if tier == "VIP" else Decimal("0"))
    return to_cents(amount * (1 - rate))
