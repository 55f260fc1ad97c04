"""Invoices: lines, quantities, the subtotal and the total due."""

from dataclasses import dataclass, field
from decimal import Decimal

from billing.money import to_cents
from billing.pricing import price_lines


@dataclass(frozen=True)
class Line:
    description: str
    quantity: int
    unit_price: Decimal

    def amount(self) -> Decimal:
        return self.unit_price * self.quantity


@dataclass
class Invoice:
    customer_tier: str
    lines: list[Line] = field(default_factory=list)

    def add(self, description: str, quantity: int, unit_price: str) -> None:
        self.lines.append(Line(description, quantity, Decimal(unit_price)))

    def subtotal(self) -> Decimal:
        return to_cents(sum((line.amount() for line in self.lines), Decimal("0")))

    def total(self) -> Decimal:
        """What the customer pays."""
        return price_lines(self.lines, self.customer_tier)
