"""Time the model gateway's start and the read-back of its records (issue 24); print a
table.

    .venv/bin/python bench/gateway_start.py [--repeat N] [--records-mb M]

`launch`: what `up` does for its gateway (its own network with egress, config.json on the
host, its image found, its state volume made and filled through the archive API, the
container started, attached to one arm network, /healthz answered), N times with the
image cached, and once after removing the image (the build on first use). `read_records`:
M MiB of records (200 bodies) put into a running gateway's volume, read back into an empty
directory, then again with nothing changed (what every later arm of a dispatch pays).
Everything made carries a `gwbench-<hex>` experiment label and is removed by it.
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runner.containers import archive, gateway, images, sandbox
from runner.containers.backend import LABEL_EXPERIMENT, Labels
from runner.containers.engine import Engine
from runner.manifest import Gateway
from tests.integration.helpers import PlainReporter

BODIES = 200


def launched(engine: Engine, base_id: str, work: Path,
             then: Callable[[str], None] | None = None) -> float:
    """Seconds of one `launch`; `then(container_id)` runs before everything is removed."""
    experiment = f"gwbench-{secrets.token_hex(3)}"
    try:
        arm_network = f"{experiment}-arm"
        engine.create_network(arm_network, Labels(experiment, "arm-network"), egress=False)
        door = gateway.Door("a", arm_network, gateway.new_token(), ("m",), {"anthropic": "K"})
        plan = gateway.plan_launch(Gateway(), f"{experiment}-gateway", base_id,
                                   Labels(experiment, "gateway"), work / experiment, "s1",
                                   [door], {"K": "sk-bench"})
        started = time.perf_counter()
        container_id = gateway.launch(engine, plan, Labels(experiment, "gateway-network"))
        seconds = time.perf_counter() - started
        if then is not None:
            then(container_id)
        return seconds
    finally:
        engine.remove_labelled({LABEL_EXPERIMENT: experiment})


def read_back(engine: Engine, container_id: str, megabytes: int, work: Path) -> list[float]:
    """Seconds of reading `megabytes` of records back into an empty directory, then again."""
    body = b"x" * (megabytes * 1024 * 1024 // BODIES)
    owner = sandbox.SANDBOX_UID
    entries = [archive.Entry(f"s1/bodies/a-{n}.response", body, 0o644, owner)
               for n in range(BODIES)]
    lines = b"".join(b'{"seq": %d}\n' % n for n in range(BODIES))
    entries += [archive.Entry("s1", None, 0o755, owner),
                archive.Entry("s1/bodies", None, 0o755, owner),
                archive.Entry("s1/requests.jsonl", lines, 0o644, owner)]
    engine.put_archive(container_id, f"{gateway.STATE_MOUNT}/{gateway.RECORDS}",
                       archive.pack(sorted(entries, key=lambda e: e.name)))
    target = work / f"read-{secrets.token_hex(3)}"
    seconds = []
    for _ in range(2):
        started = time.perf_counter()
        gateway.read_records(engine, container_id, target)
        seconds.append(time.perf_counter() - started)
    return seconds


def shown(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} s ({min(values):.3f}-{max(values):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--records-mb", type=int, default=50)
    args = parser.parse_args()
    engine = Engine()
    base = images.build(engine, ["base", "python"], PlainReporter())[-1]
    tag = gateway.image(engine, base.image_id).tag
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        images.remove_ours(engine, tag)
        cold = launched(engine, base.image_id, work)
        warm = [launched(engine, base.image_id, work) for _ in range(args.repeat)]
        reads: list[list[float]] = []
        for _ in range(3):
            launched(engine, base.image_id, work, lambda cid: reads.append(
                read_back(engine, cid, args.records_mb, work)))
    print("| step | seconds, median (min-max) |")
    print("|---|---:|")
    print(f"| `launch`, the image cached ({args.repeat} runs) | {shown(warm)} |")
    print(f"| `launch`, the image built on first use (once) | {cold:.3f} s |")
    print(f"| `read_records`, {args.records_mb} MiB in {BODIES} bodies, into an empty "
          f"directory (3 runs) | {shown([r[0] for r in reads])} |")
    print(f"| `read_records` again, nothing changed (3 runs) | {shown([r[1] for r in reads])} |")


if __name__ == "__main__":
    main()
