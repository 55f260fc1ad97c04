from decimal import Decimal

from billing.invoice import Invoice


def make_invoice(tier: str) -> Invoice:
    invoice = Invoice(customer_tier=tier)
    invoice.add("widget", 2, "30.00")
    invoice.add("gadget", 1, "40.00")
    return invoice


def test_subtotal():
    assert make_invoice("VIP").subtotal() == Decimal("100.00")


def test_regular_customer_total():
    assert make_invoice("REGULAR").total() == Decimal("95.00")


def test_invoice_total():
    assert make_invoice("VIP").total() == Decimal("90.00")
