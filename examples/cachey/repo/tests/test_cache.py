"""The acceptance test: the running service (`app`) and its Redis (`redis`), both fresh
for this sample, on the sample's own network."""

import json
import os
import urllib.request

APP = os.environ.get("CACHEY_URL", "http://app:8000")


def get(path):
    with urllib.request.urlopen(APP + path, timeout=5) as answer:
        return json.load(answer)


def test_each_currency_gets_its_own_price():
    usd = get("/price?item=apple&currency=USD")
    eur = get("/price?item=apple&currency=EUR")
    assert (usd["price"], eur["price"]) == (1.0, 0.92)


def test_a_repeated_request_is_served_from_the_cache():
    first = get("/price?item=coffee&currency=GBP")
    again = get("/price?item=coffee&currency=GBP")
    assert (first["cached"], again["cached"]) == (False, True)
    assert again["price"] == first["price"] == 3.16
