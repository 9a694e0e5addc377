"""Where a browser sample's time goes (issue 22): the browser's container by hand, with
the rig's plugin and its parts turned off one at a time, and with the CPU limit.

    .venv/bin/python bench/browser_parts.py [--repeat N]

The app and criterion are bench/browser_sample.py's, started by hand (`docker run -d
--network none`, a bind-mounted tree). Each variant is one `docker run --network
container:APP` of bakeoff/browser; the time is the container's wall (`docker run`) and
pytest's own inside it (after the app answered). Variants: plain pytest-playwright with
Debian's chromium (`bare`); the rig's plugin (`rig`); the rig's plugin without its
trace, without its route (the guard that blocks other origins), without the end-of-test
screenshot; and `bare` / `rig` under `--cpus 1`. Rounds alternate the variants, N
rounds (default 5); medians.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.browser_sample import CRITERION, LAUNCH, PORT, SERVER, WAIT, app_by_hand
from runner.containers import browser, images
from runner.containers.engine import Engine
from tests.integration.helpers import PlainReporter

HOOKS = f"{browser.PLUGIN_MODULE}/__init__.py"  # the plugin's hooks and fixtures
# The plugin with one part turned off: (what is replaced, by what).
OFF = {
    "trace": ("context.tracing.start(title=session.test, screenshots=True, snapshots=True,"
              "\n                          sources=False)", "pass"),
    "route": ('context.route("**/*", _guard(session, app_origin))', "pass"),
    "screenshot": ('_screenshots(item, "failed" if failed else "end")', "pass"),
}
PYTEST = ("python -m pytest -q -p no:cacheprovider -p pytest_base_url.plugin -p "
          "pytest_playwright.pytest_playwright -p {plugin} --base-url "
          f"http://localhost:{PORT} --output /tmp/out /criterion/test_ui.py")
VARIANTS = ("bare", "rig", "rig-no-trace", "rig-no-route", "rig-no-screenshot",
            "bare-1cpu", "rig-1cpu")


def plugins(root: Path) -> None:
    """The rig's plugin (a package) as it is (`root/rig`) and with each part off
    (`root/rig-no-X`: its hooks' module changed)."""
    files = browser.plugin_files()
    source = files[HOOKS].decode()
    for name, (part, replacement) in {"rig": ("", ""), **OFF}.items():
        text = source.replace(part, replacement) if part else source
        if part and text == source:
            raise SystemExit(f"the plugin changed: {name!r} is no longer where this looks")
        folder = root / (name if name == "rig" else f"rig-no-{name}")
        for file, data in {**files, HOOKS: text.encode()}.items():
            (folder / file).parent.mkdir(parents=True, exist_ok=True)
            (folder / file).write_bytes(data)


def run(variant: str, app_image: str, browser_image: str, tmp: Path) -> tuple[float, float]:
    """One browser container of `variant` against a fresh app: (its wall, pytest's)."""
    cpus = ["--cpus", "1"] if variant.endswith("-1cpu") else []
    variant = variant.removesuffix("-1cpu")
    if variant == "bare":
        plugin, path = "bench_launch", "/criterion"
    else:
        plugin, path = browser.PLUGIN_MODULE, f"/plugins/{variant}"
    with app_by_hand(app_image, tmp / "tree") as app:
        script = (f'python -c "{WAIT}" && mkdir -p /tmp/bo && s=$(date +%s.%N) && '
                  f'{PYTEST.format(plugin=plugin)}; echo "pytest $s $(date +%s.%N)"')
        started = time.perf_counter()
        done = subprocess.run(
            ["docker", "run", "--rm", *cpus, f"--network=container:{app}", "--user",
             "1000:1000", "-e", "HOME=/tmp", "-e", f"PYTHONPATH={path}", "-e",
             f"{browser.OUT_ENV}=/tmp/bo", "-e", "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1",
             "-v", f"{tmp / 'criterion'}:/criterion:ro", "-v", f"{tmp / 'plugins'}:/plugins:ro",
             browser_image, "sh", "-c", script], capture_output=True, text=True, check=False)
        wall = time.perf_counter() - started
    if "1 passed" not in done.stdout:
        raise SystemExit(f"{variant} did not pass: {done.stdout[-800:]}{done.stderr[-800:]}")
    began, ended = map(float, done.stdout.strip().splitlines()[-1].split()[1:])
    return wall, ended - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    engine = Engine()
    app_image = images.build(engine, ["python"], PlainReporter())[-1].image_id
    browser_image = images.resolve(engine, browser.IMAGE, PlainReporter()).image_id
    tmp = Path(tempfile.mkdtemp(prefix="bench-browser-parts-"))
    try:
        (tmp / "tree").mkdir()
        (tmp / "tree" / "server.py").write_text(SERVER)
        (tmp / "criterion").mkdir()
        (tmp / "criterion" / "test_ui.py").write_text(CRITERION)
        (tmp / "criterion" / "bench_launch.py").write_text(LAUNCH)
        plugins(tmp / "plugins")
        for path in [tmp, *tmp.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        times: dict[str, list[tuple[float, float]]] = {v: [] for v in VARIANTS}
        for _ in range(args.repeat):
            for variant in VARIANTS:
                times[variant].append(run(variant, app_image, browser_image, tmp))
    finally:
        shutil.rmtree(tmp)
    print(f"rounds: {args.repeat}, variants alternating; medians")
    print(f"{'variant':20s} {'container':>10s} {'pytest':>8s}")
    for variant, found in times.items():
        wall = statistics.median(w for w, _ in found)
        inner = statistics.median(p for _, p in found)
        print(f"{variant:20s} {wall:9.3f}s {inner:7.3f}s")


if __name__ == "__main__":
    main()
