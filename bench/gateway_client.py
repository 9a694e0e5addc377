"""The client side of bench/gateway_latency.py; runs in a container on the lab network.

    python3 gateway_client.py REQUESTS STREAMS EVENTS DELAY_S

Prints one JSON object: per-request seconds for a small non-streaming request and for the
first byte of a short stream, direct to the upstream and through the gateway,
interleaved (the order alternates every round); then STREAMS concurrent streams of EVENTS
events DELAY_S apart, through the gateway and then direct, with each stream's largest gap
between two arrivals. Standard library only, persistent connections (as the SDKs keep).
"""

from __future__ import annotations

import http.client
import itertools
import json
import os
import socket
import sys
import threading
import time
from typing import Any
from urllib.parse import urlsplit

WARMUP = 10


def connect(url: str) -> http.client.HTTPConnection:
    parts = urlsplit(url)
    return http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=60)


def wait_until_up(url: str) -> None:
    parts = urlsplit(url)
    for _ in range(150):
        try:
            socket.create_connection((parts.hostname, parts.port), timeout=2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"{url} never answered")


class Target:
    def __init__(self, url: str, path_prefix: str) -> None:
        self.url, self.prefix = url, path_prefix
        self.connection = connect(url)
        self.headers = {"x-api-key": os.environ["TOKEN"], "Content-Type": "application/json"}

    def _send(self, body: dict[str, Any]) -> http.client.HTTPResponse:
        self.connection.request("POST", f"{self.prefix}/v1/messages", json.dumps(body),
                                self.headers)
        return self.connection.getresponse()

    def small(self) -> float:
        started = time.perf_counter()
        response = self._send({"model": "claude-x", "stream": False})
        response.read()
        assert response.status == 200, response.status
        return time.perf_counter() - started

    def first_byte(self) -> float:
        started = time.perf_counter()
        response = self._send({"model": "claude-x", "stream": True, "events": 1,
                               "delay_s": 0})
        response.read1(65536)
        elapsed = time.perf_counter() - started
        response.read()
        assert response.status == 200, response.status
        return elapsed

    def stream(self, events: int, delay_s: float) -> dict[str, float]:
        started = time.perf_counter()
        response = self._send({"model": "claude-x", "stream": True, "events": events,
                               "delay_s": delay_s})
        arrivals, seen = [], 0
        while chunk := response.read1(65536):
            arrivals.append(time.perf_counter())
            seen += chunk.count(b"\n\n")
        gaps = [b - a for a, b in itertools.pairwise(arrivals)]
        return {"max_gap_s": max(gaps, default=0.0), "total_s": arrivals[-1] - started,
                "events": seen}


def concurrent(url: str, prefix: str, streams: int, events: int, delay_s: float
               ) -> list[dict[str, float]]:
    results: list[dict[str, float]] = [{} for _ in range(streams)]
    barrier = threading.Barrier(streams)

    def one(index: int) -> None:
        target = Target(url, prefix)
        barrier.wait()
        results[index] = target.stream(events, delay_s)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(streams)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def main() -> None:
    requests, streams, events, delay_s = (int(sys.argv[1]), int(sys.argv[2]),
                                          int(sys.argv[3]), float(sys.argv[4]))
    direct_url, gateway_url = os.environ["UPSTREAM"], os.environ["GATEWAY"]
    wait_until_up(direct_url)
    wait_until_up(gateway_url)
    targets = {"direct": Target(direct_url, ""), "gateway": Target(gateway_url, "/anthropic")}
    out: dict[str, Any] = {"small": {"direct": [], "gateway": []},
                           "first_byte": {"direct": [], "gateway": []}}
    for round_ in range(WARMUP + requests):
        order = ["direct", "gateway"] if round_ % 2 == 0 else ["gateway", "direct"]
        for name in order:
            small, first = targets[name].small(), targets[name].first_byte()
            if round_ >= WARMUP:
                out["small"][name].append(small)
                out["first_byte"][name].append(first)
    out["streams"] = {"gateway": concurrent(gateway_url, "/anthropic", streams, events, delay_s),
                      "direct": concurrent(direct_url, "", streams, events, delay_s)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
