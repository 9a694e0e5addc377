"""The steps of issue 24's proof (tests/integration/test_remote_engine.py) on this
machine's engine and on a second engine in a container, side by side (issue 24).

    .venv/bin/python bench/remote_engine.py [--repeat N]

The second engine is images/engine on an internal network of its own, reached at its
address there over tcp (tests/integration/remote_engine.py). Per round, for each engine in
alternating order: the base's rootfs streamed into `import_image`, a toolchain built FROM
it from a streamed context (no cache), a hardened container on an internal network run to
its end, a tree of 200 files (800 KiB) put into a held volume with `put_archive` and read
back with `get_archive`, and the same tree on the stdin of a one-shot container. Once,
for the second engine only: its start until it answers, and `docker save | load` of the
base and of bakeoff/python through both APIs. Medians and ranges of N rounds (default 5).
Everything made is removed by its labels (the probe images by theirs).
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


from runner.containers import images
from runner.containers.backend import Labels
from runner.containers.engine import Engine
from runner.errors import EngineRefusedError
from tests.integration import remote_steps as steps
from tests.integration.helpers import PlainReporter
from tests.integration.remote_engine import copy_image, import_rootfs, rootfs_tarball, started

T = TypeVar("T")
STEPS = ("import the base rootfs (stream)", "build a toolchain (streamed context, no cache)",
         "run a hardened container", "put_archive a tree (200 files, 800 KiB)",
         "get_archive the tree", "a tree on stdin of a one-shot container")
Timings = dict[str, list[float]]


def timed(into: list[float], fn: Callable[[], T]) -> T:
    began = time.perf_counter()
    result = fn()
    into.append(time.perf_counter() - began)
    return result


def one_round(engine: Engine, tarball: Path, experiment: str, seconds: Timings) -> None:
    """Every step once on `engine`; what it made removed (but the probe images)."""
    labels = Labels(experiment, "remote-probe", run=secrets.token_hex(3))
    archive = steps.tar_bytes(steps.tree(200, 4096))
    try:
        with tarball.open("rb") as stream:
            timed(seconds[STEPS[0]], lambda: import_rootfs(engine, stream, steps.BASE_TAG,
                                                           steps.LABEL))
        image = timed(seconds[STEPS[1]], lambda: steps.build_toolchain(
            engine, steps.BASE_TAG, steps.TOOLCHAIN_TAG))
        timed(seconds[STEPS[2]], lambda: steps.run_hardened(engine, image, labels))
        with steps.holder(engine, image, labels) as held:
            timed(seconds[STEPS[3]], lambda: steps.put_tree(engine, held, archive))
            timed(seconds[STEPS[4]], lambda: steps.get_tree(engine, held))
        timed(seconds[STEPS[5]], lambda: steps.tree_on_stdin(engine, image, labels, archive))
    finally:
        steps.remove_probes(engine, experiment, labels.run)


def remove_probe_images(engine: Engine) -> None:
    """Every image carrying the probes' label (a child before its parent: a few passes)."""
    for _ in range(5):
        found = engine.client.images.list(all=True, filters={
            "label": f"io.bakeoff.image={steps.LABEL}"})
        if not found:
            return
        for image in found:
            try:
                images.remove_ours(engine, str(image.id))
            except EngineRefusedError:
                continue  # a parent of another probe image: the next pass


def shown(values: list[float]) -> str:
    return (f"{statistics.median(values):.3f} s ({min(values):.3f}-{max(values):.3f})"
            if values else "-")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    tarball = rootfs_tarball()
    if not tarball.is_file():
        raise SystemExit(f"no cached rootfs at {tarball}: run `bakeoff-sandbox images build "
                         "base` (without BAKEOFF_BASE_IMAGE) first")
    host = Engine()
    built = {b.name: b for b in images.build(host, ["base", "python", "engine"],
                                              PlainReporter())}
    experiment = f"bench{secrets.token_hex(3)}"
    once: dict[str, float] = {}
    began = time.perf_counter()
    with started(host, built["engine"], experiment) as remote:
        once["second engine: start until it answers"] = time.perf_counter() - began
        for ref in (built["base"].tag, built["python"].tag):
            load = time.perf_counter()
            copy_image(host, remote.engine, ref)
            once[f"docker save | load {ref}"] = time.perf_counter() - load
        local: Timings = {step: [] for step in STEPS}
        there: Timings = {step: [] for step in STEPS}
        try:
            for n in range(args.repeat):
                order = [(host, local), (remote.engine, there)]
                for engine, seconds in (order if n % 2 == 0 else order[::-1]):
                    one_round(engine, tarball, experiment, seconds)
        finally:
            remove_probe_images(host)
    print(f"{'step':<48}  {'local engine':>28}  {'second engine':>28}  ratio")
    for step in STEPS:
        ratio = statistics.median(there[step]) / statistics.median(local[step])
        print(f"{step:<48}  {shown(local[step]):>28}  {shown(there[step]):>28}  {ratio:.2f}x")
    for what, value in once.items():
        print(f"{what:<48}  {'':>28}  {value:>26.3f} s")


if __name__ == "__main__":
    main()
