"""The model gateway's added latency, side by side with a direct connection (issue 13).

    .venv/bin/python bench/gateway_latency.py [--requests N] [--streams K] [--events E]
                                              [--delay-ms D]

Three containers on one internal network, as `up` will run them: a stdlib SSE upstream
(tests/integration/sse_upstream.py), the gateway (`python3 -m gateway`, uid 1000, the
package mounted read-only), and a client (bench/gateway_client.py) that times, interleaved,
N small non-streaming requests and N time-to-first-byte of a short stream, direct to the
upstream and through the gateway (after 10 warm-up rounds), then K streams of E events
D ms apart at once, through the gateway and direct, with each stream's largest gap
between arrivals (a stall would show as a gap far above D). Prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runner.containers import images
from runner.containers.engine import Engine
from tests.integration.gateway_lab import gateway_lab, run_client
from tests.integration.helpers import PlainReporter

CLIENT = Path(__file__).resolve().parent / "gateway_client.py"


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def latency_rows(results: dict[str, dict[str, list[float]]]) -> list[str]:
    rows = []
    for kind, label in (("small", "small request, total"), ("first_byte", "stream, first byte")):
        direct, via = results[kind]["direct"], results[kind]["gateway"]
        cells = [f"{1000 * percentile(v, q):.2f}" for v in (direct, via) for q in (0.5, 0.95)]
        added = 1000 * (statistics.median(via) - statistics.median(direct))
        rows.append(f"| {label} | {len(via)} | {cells[0]} | {cells[1]} | {cells[2]} | "
                    f"{cells[3]} | {added:+.2f} |")
    return rows


def stream_rows(streams: dict[str, list[dict[str, float]]], delay_ms: float) -> list[str]:
    rows = []
    for name in ("gateway", "direct"):
        gaps = [1000 * s["max_gap_s"] for s in streams[name]]
        totals = [1000 * s["total_s"] for s in streams[name]]
        events = sorted({int(s["events"]) for s in streams[name]})
        rows.append(f"| {name} | {len(gaps)} | {delay_ms:g} | {min(gaps):.1f} | "
                    f"{max(gaps):.1f} | {max(totals):.0f} | {events} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--events", type=int, default=20)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    args = parser.parse_args()
    engine = Engine()
    image = images.build(engine, ["python"], PlainReporter())[-1]
    with tempfile.TemporaryDirectory() as tmp, gateway_lab(engine, image.image_id,
                                                           Path(tmp)) as lab:
        status, out = run_client(lab, CLIENT, str(args.requests), str(args.streams),
                                 str(args.events), str(args.delay_ms / 1000), timeout_s=1800)
        if status != 0:
            raise SystemExit(f"the bench client failed ({status}):\n{out}")
        results = json.loads(out)
    print("| measure | n | direct p50 ms | direct p95 ms | gateway p50 ms | gateway p95 ms "
          "| added at p50 ms |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(latency_rows(results)))
    print()
    print("| concurrent streams | streams | event delay ms | max gap, best stream ms | "
          "max gap, worst stream ms | slowest stream total ms | events per stream |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(stream_rows(results["streams"], args.delay_ms)))


if __name__ == "__main__":
    main()
