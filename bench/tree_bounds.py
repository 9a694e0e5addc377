"""What a sample's tree costs the orchestrator: time and peak RSS of laying one out.

    .venv/bin/python bench/tree_bounds.py [--code DIR] [--only NAME ...]

For each tree (built once from git objects in a temporary repository, as an attacker
would: nested trees sharing one blob), a FRESH process does what the executor does before
a sample's container starts (`SettingMaker._tree`): read the arm's and the base's
trees (`tree.read_tree`, capped by the default `[limits]`), lay the rig's layer on
top (`tree.build`: pinning, the protected file, the canaries) and write the tar.
It prints the wall time, the outcome, and the process's peak RSS (VmHWM) before and after.
`--code DIR` runs the same with another checkout's `rig`/`runner` (e.g. the code before
issue 20: its `read_tree(repo, commit, limit_bytes)` and a tar in memory). No docker.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.integration.tree_lab import FILE, TREE, blob, commit_with, fan, tree

MIB = 1024 * 1024
CHILD = r"""
import json, sys, time
from pathlib import Path
from rig.sample.spec import SampleSpec
from runner.containers.samples import tree

def hwm():
    status = Path("/proc/self/status").read_text()
    return int(next(l for l in status.splitlines() if l.startswith("VmHWM:")).split()[1])

repo, head, base, out = Path(sys.argv[1]), sys.argv[2], sys.argv[3], Path(sys.argv[4])
spec = SampleSpec(change="c", arm="a", check="success", n=1, commit=head, base_commit=base,
                  command="pytest -q tests/test_h.py", parser="pytest", timeout_s=60,
                  protected=("tests/test_h.py",), harness="base")
before, started = hwm(), time.monotonic()
try:
    if hasattr(tree, "listing"):  # streamed: caps, a tar file
        arm = tree.read_tree(repo, head)
        built = tree.build(spec, arm, tree.read_tree(repo, base), out, repo)
    else:  # before: every blob held, a tar in memory
        limit = 2048 * 1024 * 1024
        arm = tree.read_tree(repo, head, limit)
        built = tree.build(spec, arm, tree.read_tree(repo, base, limit))
        out.write_bytes(built.tar)
    outcome = f"laid out: {len(arm)} paths, tar {out.stat().st_size // (1024 * 1024)} MiB"
except Exception as error:  # the outcome is what is measured
    outcome = f"{type(error).__name__}: {str(error)[:90]}"
print(json.dumps({"s": time.monotonic() - started, "before_kb": before, "peak_kb": hwm(),
                  "outcome": outcome}))
"""


def trees(repo: Path, base: str) -> dict[str, str]:
    """name -> a commit on `base` with that tree added."""
    empty = blob(repo, b"")
    conftest = tree(repo, {b"conftest.py": (FILE, blob(repo, b"import os\n"))})
    names = tree(repo, {b"%06d" % i + b"n" * 244: (FILE, empty) for i in range(600)})
    medium = {b"m%04d.bin" % i: (FILE, blob(repo, b"%08d\n" % i * (MIB // 9) + bytes(MIB % 9)))
              for i in range(300)}
    added = {
        "1M empty files, 1000 x 1000": fan(repo, (FILE, empty), [1000, 1000]),
        "1M empty files, one directory": fan(repo, (FILE, empty), [1_000_000]),
        "78k files, 40 MB of names": tree(
            repo, {b"%06d" % i + b"d" * 244: (TREE, names) for i in range(130)}),
        "99,000 empty files (legal)": fan(repo, (FILE, empty), [99, 1000]),
        "one 250 MB file (legal)": tree(repo, {b"big.bin": (FILE, blob(repo, bytes(250 * MIB)))}),
        "300 files of 1 MiB (legal)": tree(repo, medium),
        "45k conftest.py (legal)": tree(
            repo, {b"c%05d" % i: (TREE, conftest) for i in range(45_000)}),
    }
    return {name: commit_with(repo, base, {b"added": (TREE, oid)}) for name, oid in added.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--code", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--only", nargs="*", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
        (repo / "tests").mkdir()
        (repo / "tests" / "test_h.py").write_text("def test_h():\n    assert False\n")
        subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
        subprocess.run(["git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm",
                        "base"], cwd=repo, check=True)
        base = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True,
                              text=True, check=True).stdout.strip()
        print(f"code: {args.code}")
        print(f"{'tree':34} {'seconds':>8} {'RSS growth':>11} {'peak RSS':>9}  outcome")
        for name, head in trees(repo, base).items():
            if args.only and not any(word in name for word in args.only):
                continue
            done = subprocess.run([sys.executable, "-c", CHILD, str(repo), head, base,
                                   str(Path(tmp) / "tree.tar")], cwd=tmp, capture_output=True,
                                  text=True,
                                  env={"PYTHONPATH": str(args.code), "PATH": "/usr/bin:/bin"},
                                  timeout=1800, check=True)
            found = json.loads(done.stdout)
            grew = (found["peak_kb"] - found["before_kb"]) / 1024
            print(f"{name:34} {found['s']:8.1f} {grew:8.0f} MB {found['peak_kb'] / 1024:6.0f} MB"
                  f"  {found['outcome']}", flush=True)


if __name__ == "__main__":
    main()
