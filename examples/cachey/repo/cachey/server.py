"""`python3 -m cachey.server`: GET /healthz (Redis answers), GET /price?item=&currency=.

A computed price is cached in Redis for five minutes; the answer says whether it came
from the cache.
"""

from __future__ import annotations

import json
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from cachey.prices import UnknownError, price
from cachey.store import Redis, RedisError


def cache_key(item: str, currency: str) -> str:
    return f"price:{item}"


def lookup(store: Redis, item: str, currency: str) -> dict[str, object]:
    key = cache_key(item, currency)
    cached = store.get(key)
    if cached is not None:
        return {"item": item, "currency": currency, "price": float(cached), "cached": True}
    value = price(item, currency)
    store.set(key, str(value))
    return {"item": item, "currency": currency, "price": value, "cached": False}


class Handler(BaseHTTPRequestHandler):
    store = Redis()

    def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
        url = urlparse(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        try:
            if url.path == "/healthz":
                self._send(200 if self.store.ping() else 503, {"redis": "ok"})
            elif url.path == "/price":
                self._send(200, lookup(self.store, query.get("item", ""),
                                       query.get("currency", "USD")))
            else:
                self._send(404, {"error": "not found"})
        except UnknownError as error:
            self._send(404, {"error": str(error)})
        except (RedisError, OSError) as error:
            self._send(503, {"error": f"redis: {error}"})

    def _send(self, status: int, body: dict[str, object]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        print(f"{self.address_string()} {format % args}", flush=True)


def main() -> None:
    port = int(os.environ.get("PORT", "8000"))
    print(f"cachey on :{port}, redis at {Handler.store.host}:{Handler.store.port}", flush=True)
    ThreadingHTTPServer(("0.0.0.0", port), Handler).serve_forever()


if __name__ == "__main__":
    main()
