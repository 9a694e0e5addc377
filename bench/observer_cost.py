"""What the rig's observer costs a pytest sample, side by side in one run.

    .venv/bin/python bench/observer_cost.py [--repeat N] [--tests T]

A project of T trivial tests (default 300) and one protected test, in the python image:

- `oracle`: one sample through the real executor (the observer's hook, plugin and root
  reader, the canaries, the rig's layer), as `score` runs it;
- `bare`: `docker run --rm IMAGE pytest …` of the same tree, copied in with `put_archive`,
  nothing of the rig's;
- `in-container`: inside ONE container, `pytest` with the observer's hook and plugin vs
  without, alternating: the per-test cost of the audit hook and the attested calls alone.

N of each, alternating (default 5); prints medians and ratios.
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rig.sample.oracle import run_sample
from rig.sample.spec import SampleSpec
from runner.containers import images, sandbox
from runner.containers.engine import Engine
from runner.containers.samples.executor import DockerSampleExecutor, insample
from tests.integration.helpers import PlainReporter, git

PROTECTED = "tests/test_horizon.py"
COMMAND = "python3 -m pytest -q -p no:cacheprovider tests"


def project(root: Path, tests: int) -> None:
    (root / "tests").mkdir(parents=True)
    (root / "horizon.py").write_text("def clamp(x):\n    return min(x, 90)\n")
    (root / PROTECTED).write_text("from horizon import clamp\n\n\ndef test_horizon():\n"
                                  "    assert clamp(91) == 90\n")
    (root / "tests" / "test_many.py").write_text("".join(
        f"def test_{n}():\n    assert {n} + 1 == {n + 1}\n\n\n" for n in range(tests)))


def tar_of(root: Path) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        tar.add(root, arcname="w", filter=lambda i: None if ".git" in i.name else i)
    return out.getvalue()


def bare(engine: Engine, image: str, data: bytes, command: str) -> float:
    started = time.perf_counter()
    container = engine.client.containers.create(image, ["sh", "-c", f"cd /tmp/w && {command}"],
                                                network_mode="none",
                                                labels={"io.bakeoff.experiment": "bench"})
    try:
        container.put_archive("/tmp", data)
        container.start()
        container.wait(timeout=300)
    finally:
        container.remove(force=True)
    return time.perf_counter() - started


IN_CONTAINER = r'''
set -e
mkdir -p /tmp/obs /tmp/observe
sed -i 's#/bakeoff/in/observe/config.json#/tmp/observe/config.json#' \
  /tmp/plugin/bakeoff_hook.py /tmp/plugin/bakeoff_observer.py
cat > /tmp/observe/config.json <<EOF
{"socket": "/tmp/obs/sock", "plugin_paths": ["/tmp/plugin/bakeoff_observer.py"],
 "plugin_sha256": "$(sha256sum /tmp/plugin/bakeoff_observer.py | cut -d' ' -f1)",
 "pinned": {}, "untrusted": ["/tmp/w/"], "trusted": ["/tmp/plugin/"], "user_site": ""}
EOF
python3 -I -S /tmp/reader.py /tmp/obs/sock /tmp/obs/out 100000000 &
while [ ! -S /tmp/obs/sock ]; do sleep 0.02; done
cd /tmp/w
for n in $(seq 1 REPEAT); do
  a=$(date +%s%N); COMMAND >/dev/null 2>&1 || true; b=$(date +%s%N)
  PYTHONPATH=/tmp/plugin PYTEST_ADDOPTS="-p bakeoff_observer" COMMAND >/dev/null 2>&1 || true
  c=$(date +%s%N)
  echo "without $(( (b - a) / 1000000 )) with $(( (c - b) / 1000000 ))"
done
python3 -I -S -c 'import socket
socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b"bakeoff-stop", "/tmp/obs/sock")'
wait
echo "records $(wc -l < /tmp/obs/out)"
'''


def in_container(engine: Engine, image: str, data: bytes, repeat: int) -> list[str]:
    files = io.BytesIO()
    with tarfile.open(fileobj=files, mode="w") as tar:
        for name, source in (("plugin/bakeoff_hook.py", "observer_hook.py"),
                             ("plugin/sitecustomize.py", "observer_site.py"),
                             ("plugin/bakeoff_observer.py", "observer_plugin.py"),
                             ("reader.py", "observer_reader.py")):
            body = insample(source)
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(body), 0o644
            tar.addfile(info, io.BytesIO(body))
    script = IN_CONTAINER.replace("REPEAT", str(repeat)).replace("COMMAND", COMMAND)
    container = engine.client.containers.create(image, ["sh", "-c", script], user="0",
                                                network_mode="none",
                                                labels={"io.bakeoff.experiment": "bench"})
    try:
        container.put_archive("/tmp", data)
        container.put_archive("/tmp", files.getvalue())
        container.start()
        container.wait(timeout=600)
        lines = bytes(container.logs()).decode().split("\n")
        print(next((line for line in lines if line.startswith("records")), "no records"))
        return lines
    finally:
        container.remove(force=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--tests", type=int, default=300)
    args = parser.parse_args()
    engine = Engine()
    image = images.build(engine, ["python"], PlainReporter())[-1]
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        project(repo, args.tests)
        git(repo, "init", "-q", "-b", "main")
        git(repo, "add", "-A")
        git(repo, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "base")
        head = git(repo, "rev-parse", "HEAD")
        data = tar_of(repo)
        oracle_s, bare_s = [], []
        with DockerSampleExecutor(engine, repo, "bench", image,
                                  sandbox.SandboxLimits()) as executor:
            for n in range(1, args.repeat + 1):
                spec = SampleSpec(change="bench", arm="a", check="tests", n=n, commit=head,
                                  base_commit=head, command=COMMAND, parser="pytest",
                                  timeout_s=300, protected=(PROTECTED,), harness="base")
                started = time.perf_counter()
                record = run_sample(executor, spec, Path(tmp) / "stage")
                oracle_s.append(time.perf_counter() - started)
                assert str(record.verdict) == "PASS", record.detail
                bare_s.append(bare(engine, image.image_id, data, COMMAND))
        rows = [line.split() for line in in_container(engine, image.image_id, data, args.repeat)
                if line.startswith("without")]
    without = statistics.median(float(r[1]) / 1000 for r in rows)
    with_ = statistics.median(float(r[3]) / 1000 for r in rows)
    oracle, plain = statistics.median(oracle_s), statistics.median(bare_s)
    print(f"{args.tests + 1} tests, {args.repeat} runs of each, alternating")
    print(f"oracle sample {oracle:.3f} s, bare docker run {plain:.3f} s: "
          f"{oracle / plain:.2f}x")
    print(f"in one container: pytest {without:.3f} s, with the observer {with_:.3f} s: "
          f"{with_ / without:.2f}x ({(with_ - without) / (args.tests + 3) * 1000:.2f} ms a test)")


if __name__ == "__main__":
    main()
