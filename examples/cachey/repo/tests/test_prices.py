import pytest

from cachey.prices import UnknownError, price


def test_usd_is_the_base_price():
    assert price("apple", "USD") == 1.00


def test_other_currencies_are_converted():
    assert price("bread", "EUR") == 2.30
    assert price("coffee", "JPY") == 604.0


def test_unknown_item_or_currency():
    with pytest.raises(UnknownError):
        price("gold", "USD")
    with pytest.raises(UnknownError):
        price("apple", "XXX")
