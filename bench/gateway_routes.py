"""The gateway's added latency per route, side by side with a direct connection (issue 32).

    .venv/bin/python bench/gateway_routes.py [--requests N]

Three processes on loopback, no container: a scripted provider (bench/route_upstream.py,
each route's real stream shape), the gateway (`python3 -m gateway`, its records written
to a temporary state directory as in a run), and this client. For every route (Anthropic
Messages, OpenAI Responses, Chat Completions, Gemini streamGenerateContent, and Messages
through a named `[[gateway.upstreams]]` entry) it times N streamed requests direct to the
provider and N through the gateway, interleaved (the order alternates every round, after
20 warm-up rounds), each on a persistent connection as the SDKs keep: the first byte
(the response's headers) and the whole stream. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KEY = "sk-bench-REAL-0123456789"
TOKEN, NAMED_TOKEN = "tok-bench-implicit", "tok-bench-named"
WARMUP = 20
MESSAGES = {"model": "claude-x", "stream": True, "max_tokens": 16,
            "output_config": {"effort": "high"},
            "messages": [{"role": "user", "content": "hello"}]}


@dataclass(frozen=True)
class Route:
    label: str
    gateway_path: str
    direct_path: str
    credential: str                 # the header that carries the key (or token)
    body: dict[str, object]
    token: str = TOKEN

    def headers(self, secret: str) -> dict[str, str]:
        value = f"Bearer {secret}" if self.credential == "Authorization" else secret
        return {self.credential: value, "Content-Type": "application/json"}


ROUTES = (
    Route("anthropic messages", "/anthropic/v1/messages", "/v1/messages", "x-api-key",
          MESSAGES),
    Route("openai responses", "/openai/v1/responses", "/v1/responses", "Authorization",
          {"model": "gpt-x", "stream": True, "reasoning": {"effort": "high"}, "input": "hi"}),
    Route("chat completions", "/openai/v1/chat/completions", "/v1/chat/completions",
          "Authorization", {"model": "gpt-y", "stream": True, "reasoning_effort": "high",
                            "messages": [{"role": "user", "content": "hi"}]}),
    Route("gemini streamGenerateContent",
          "/gemini/v1beta/models/gemini-x:streamGenerateContent?alt=sse",
          "/v1beta/models/gemini-x:streamGenerateContent?alt=sse", "x-goog-api-key",
          {"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
           "generationConfig": {"thinkingConfig": {"thinkingLevel": "HIGH"}}}),
    Route("anthropic messages, named upstream", "/anthropic/v1/messages", "/v1/messages",
          "x-api-key", MESSAGES, NAMED_TOKEN),
)


@dataclass
class Timings:
    first: list[float] = field(default_factory=list)
    total: list[float] = field(default_factory=list)


def config(upstream: str) -> dict[str, object]:
    keys = {"anthropic": "BENCH_KEY", "openai": "BENCH_KEY", "gemini": "BENCH_KEY"}
    return {"upstreams": {"anthropic": upstream, "openai": upstream, "gemini": upstream,
                          "bench-named": {"protocol": "anthropic", "base_url": upstream,
                                          "key": "BENCH_KEY"}},
            "tokens": {TOKEN: {"stage": "bench", "arm": "implicit", "models": None,
                               "keys": keys},
                       NAMED_TOKEN: {"stage": "bench", "arm": "named", "models": None,
                                     "upstream": "bench-named"}}}


@contextmanager
def processes(state: Path) -> Iterator[tuple[int, int]]:
    """The provider and the gateway running; yields (provider port, gateway port)."""
    env = {**os.environ, "EXPECTED_KEY": KEY, "BENCH_KEY": KEY, "PYTHONPATH": str(ROOT)}
    provider = subprocess.Popen([sys.executable, str(ROOT / "bench" / "route_upstream.py")],
                                env=env, stdout=subprocess.PIPE, text=True)
    log = (state / "gateway.log").open("w")
    gateway = None
    try:
        assert provider.stdout is not None
        upstream_port = int(provider.stdout.readline())
        state.mkdir(exist_ok=True)
        (state / "config.json").write_text(json.dumps(config(
            f"http://127.0.0.1:{upstream_port}")))
        gateway = subprocess.Popen([sys.executable, "-m", "gateway", "--state", str(state),
                                    "--host", "127.0.0.1", "--port", "0"], env=env,
                                   stderr=log, cwd=ROOT)
        yield upstream_port, listening_port(state / "gateway.log")
    finally:
        for process in (gateway, provider):
            if process is not None:
                process.terminate()
                process.wait(timeout=10)
        log.close()


def listening_port(log: Path) -> int:
    for _ in range(100):
        for line in log.read_text().splitlines():
            if "listening on" in line:
                return int(line.split("listening on ")[1].split(",")[0].rsplit(":", 1)[1])
        time.sleep(0.05)
    raise SystemExit(f"the gateway never listened:\n{log.read_text()}")


def timed(connection: http.client.HTTPConnection, path: str, headers: dict[str, str],
          body: bytes) -> tuple[float, float]:
    """(seconds to the response's headers, seconds to its last byte)."""
    started = time.perf_counter()
    connection.request("POST", path, body, headers)
    response = connection.getresponse()
    first = time.perf_counter() - started
    response.read()
    total = time.perf_counter() - started
    if response.status != 200:
        raise SystemExit(f"POST {path} answered {response.status}")
    return first, total


def measure(route: Route, upstream_port: int, gateway_port: int, n: int
            ) -> dict[str, Timings]:
    connections = {"direct": http.client.HTTPConnection("127.0.0.1", upstream_port),
                   "gateway": http.client.HTTPConnection("127.0.0.1", gateway_port)}
    calls = {"direct": (route.direct_path, route.headers(KEY)),
             "gateway": (route.gateway_path, route.headers(route.token))}
    body = json.dumps(route.body).encode()
    results = {name: Timings() for name in calls}
    for round_ in range(WARMUP + n):
        order = ("direct", "gateway") if round_ % 2 else ("gateway", "direct")
        for name in order:
            first, total = timed(connections[name], *calls[name], body)
            if round_ >= WARMUP:
                results[name].first.append(first)
                results[name].total.append(total)
    for connection in connections.values():
        connection.close()
    return results


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def row(route: Route, results: dict[str, Timings]) -> str:
    direct, via = results["direct"], results["gateway"]
    cells = [f"{1000 * percentile(t.total, q):.2f}" for t in (direct, via) for q in (0.5, 0.95)]
    added = 1000 * (statistics.median(via.total) - statistics.median(direct.total))
    first = 1000 * (statistics.median(via.first) - statistics.median(direct.first))
    return (f"| {route.label} | {len(via.total)} | {' | '.join(cells)} | {added:+.2f} | "
            f"{first:+.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, processes(Path(tmp)) as (upstream, gateway):
        rows = [row(route, measure(route, upstream, gateway, args.requests))
                for route in ROUTES]
    print("| route (streamed) | n | direct p50 ms | direct p95 ms | gateway p50 ms | "
          "gateway p95 ms | added at p50 ms | first byte added at p50 ms |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
