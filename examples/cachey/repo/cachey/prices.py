"""Prices: a base price in USD per item, converted at a fixed rate per currency."""

from __future__ import annotations

BASE_USD = {"apple": 1.00, "bread": 2.50, "coffee": 4.00}
RATES = {"USD": 1.0, "EUR": 0.92, "GBP": 0.79, "JPY": 151.0}


class UnknownError(ValueError):
    """An item or a currency we do not price."""


def price(item: str, currency: str) -> float:
    if item not in BASE_USD:
        raise UnknownError(f"unknown item {item!r}")
    if currency not in RATES:
        raise UnknownError(f"unknown currency {currency!r}")
    return round(BASE_USD[item] * RATES[currency], 2)
