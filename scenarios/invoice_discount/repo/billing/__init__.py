"""Invoices and customer-tier discounts."""
