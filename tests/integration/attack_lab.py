"""The set-up every adversarial grading test shares: a base whose protected success test
fails, an attack commit on top, and samples through the real docker executor exactly as
`runner.commands.sample_runs.run_all` runs them (`rig.sample.oracle.run_sample` with `BaseRuns`).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import io
import json
import os
import secrets
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest

from rig.sample import tree as tree_mod
from rig.sample.metric import Ratchet
from rig.sample.oracle import run_sample
from rig.sample.record import SampleRecord
from rig.sample.spec import SampleSpec, ServerSpec
from runner.commands.sample_runs import BaseRuns
from runner.containers import images, sandbox
from runner.containers.backend import LABEL_EXPERIMENT, Labels
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from runner.containers.samples.executor import DockerSampleExecutor
from tests.integration.helpers import PlainReporter, cli, git, make_target

BUG = "def clamp(x):\n    return x\n"
FIX = "def clamp(x):\n    return min(x, 90)\n"
PROTECTED = "tests/test_horizon.py"
TEST = "from horizon import clamp\n\n\ndef test_horizon():\n    assert clamp(91) == 90\n"
PYPROJECT = ('[project]\nname = "horizon"\nversion = "0"\n\n'
             '[tool.pytest.ini_options]\npythonpath = ["src"]\n')
BASE = {"src/horizon.py": BUG, PROTECTED: TEST, "pyproject.toml": PYPROJECT}
SUCCESS = f"pytest -q -p no:cacheprovider {PROTECTED}"
CHECK = "pytest -q -p no:cacheprovider tests"
PASSING_VARIANT = "def test_horizon():\n    assert True\n"
# What the record says when the honest failure stands: the base's harness ran.
HONEST = ("FAIL", "tests_failed")
# A hookwrapper that turns every report into "passed": the forced-pass plugin several
# attacks load by some other route.
FORCE_PASSED = '''import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome, report.longrepr = "passed", None
'''
# Code under test that finds pytest's Config through the assertion rewriter on sys.meta_path.
FIND_CONFIG = '''import sys


def _config():
    for finder in sys.meta_path:
        if getattr(finder, "config", None) is not None:
            return finder.config
    raise RuntimeError("no config")
'''


@dataclass(frozen=True)
class Link:
    """A symlink to commit (its target, as git stores it)."""

    target: str


Files = Mapping[str, str | bytes | Link | None]


def attacking(code: str, before: str = BUG) -> str:
    """The module under test, `code` run at its import, the bug still in it."""
    return code.rstrip("\n") + "\n\n\n" + before


@dataclass(frozen=True)
class Usage:
    """What grading one sample cost the orchestrator's process."""

    cpu_s: float  # time.process_time() around run_sample
    grew_kb: int  # growth of the peak RSS (VmHWM) across it
    peak_kb: int = 0  # the process's peak RSS, all of it (imports, executor, grading)
    wall_s: float = 0.0  # time.monotonic() around run_sample


# `Lab.grade_apart`'s orchestrator: one sample, as `run_all` grades it, in a fresh process.
PROBE = """import json, sys, time
from pathlib import Path
from rig.sample.spec import SampleSpec
from rig.sample.oracle import run_sample
from runner.containers import sandbox
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from runner.containers.samples.executor import DockerSampleExecutor
from runner.commands.sample_runs import BaseRuns



def peak_kb():
    # VmHWM: this process image's own peak RSS. (ru_maxrss also counts the parent's RSS
    # at the fork before exec: a test that built a large tree would hide the growth.)
    status = Path("/proc/self/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1])


job = json.loads(sys.argv[1])
spec = SampleSpec(**{**job["spec"], "protected": tuple(job["spec"]["protected"]),
                     "requires": tuple(job["spec"]["requires"])})
stage = Path(job["stage"])
with DockerSampleExecutor(Engine(), Path(job["repo"]), job["experiment"],
                          BuiltImage(**job["image"]),
                          sandbox.SandboxLimits(**job["limits"])) as executor:
    rss, cpu, wall = peak_kb(), time.process_time(), time.monotonic()
    record = run_sample(executor, spec, stage, BaseRuns(executor, stage))
    cpu, wall = time.process_time() - cpu, time.monotonic() - wall
    peak = peak_kb()
print(json.dumps({"cpu_s": cpu, "grew_kb": peak - rss, "peak_kb": peak, "wall_s": wall,
                  "record": record.model_dump(mode="json")}))
"""


@dataclass
class Lab:
    """One repository and one executor; `grade` runs one sample of a commit."""

    repo: Path
    executor: DockerSampleExecutor
    stage: Path
    base: str = ""
    graded: list[str] = field(default_factory=list)
    # The base's runs, shared by every grade of the lab (as `run_all` shares them by
    # round): one base sample per (base commit, command, ...), not one per attack.
    bases: dict[str, BaseRuns] = field(default_factory=dict)

    def commit(self, files: Files, message: str) -> str:
        return commit(self.repo, files, message)

    def on_base(self, files: Files, message: str = "attack") -> str:
        """`files` committed on top of `self.base` itself (not on the previous attack): a
        module's attacks share one lab, each one commit from the base."""
        git(self.repo, "checkout", "-q", "--detach", "--force", self.base)
        git(self.repo, "clean", "-fdxq")
        return self.commit(files, message)

    def attack(self, files: Files, base: Mapping[str, str] = BASE) -> str:
        """The base commit (once), then the attack commit on top of it."""
        if not self.base:
            self.base = self.commit(base, "base: the protected success test fails")
        return self.commit(files, "attack")

    def variant(self, files: Files, base: Mapping[str, str] = BASE) -> str:
        """An attack commit straight on the base (a lab shared by several attacks: no
        attack sees another's files)."""
        if self.base:
            git(self.repo, "reset", "-q", "--hard", self.base)
            git(self.repo, "clean", "-qfdx")
        return self.attack(files, base)

    def spec(self, commit: str, *, command: str = SUCCESS, parser: str = "pytest",
             check: str = "success", harness: Literal["base", "arm"] = "base",
             protected: tuple[str, ...] = (PROTECTED,),
             requires: tuple[str, ...] = ("python3", "pytest"), server: ServerSpec | None = None,
             timeout_s: float = 60, ratchet: Ratchet | None = None) -> SampleSpec:
        """One sample of `commit` against `self.base`, under a fresh arm name."""
        arm = f"arm{len(self.graded) + 1}"
        self.graded.append(arm)
        return SampleSpec(change="attack", arm=arm, check=check, n=1, commit=commit,
                          base_commit=self.base, command=command, parser=parser,
                          timeout_s=timeout_s, protected=protected, requires=requires,
                          server=server, harness=harness, ratchet=ratchet)

    def grade(self, commit: str, **how: Any) -> SampleRecord:
        """One sample of `commit` (`spec`'s options), diagnosed as `run_all` does."""
        return self.grade_spec(self.spec(commit, **how))

    def grade_spec(self, spec: SampleSpec) -> SampleRecord:
        return run_sample(self.executor, spec, self.stage, self.base_runs(spec.command))

    def base_runs(self, command: str) -> BaseRuns:
        """The base's runs of `command`. A stage keeps one base record per check name (a
        manifest has one command per check, and a stored sample is never re-run), so a
        lab that grades several commands as one check keeps each one's apart: compared
        with another command's base run, a verdict would be judged against the wrong
        base."""
        if command not in self.bases:
            self.bases[command] = BaseRuns(self.executor,
                                           self.stage / "bases" / str(len(self.bases)))
        return self.bases[command]

    def grade_apart(self, commit: str, timeout_s: float, **how: Any
                    ) -> tuple[SampleRecord, Usage]:
        """`grade` in a fresh orchestrator process of its own, stopped (and failed) after
        `timeout_s`: the record and what grading it cost that process."""
        spec = self.spec(commit, **how)
        job = {"spec": dataclasses.asdict(spec), "stage": str(self.stage),
               "repo": str(self.repo), "experiment": self.executor.experiment,
               "image": dataclasses.asdict(self.executor.image),
               "limits": dataclasses.asdict(self.executor.limits)}
        try:
            done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(job)],
                                  capture_output=True, text=True, timeout=timeout_s, check=True)
        except subprocess.TimeoutExpired:
            done = None
        if done is None:  # killed: its executor left its scratch directory
            for left in Path(tempfile.gettempdir()).glob(
                    f"bakeoff-{self.executor.experiment}-samples-*"):
                shutil.rmtree(left, ignore_errors=True)
            pytest.fail(f"grading {spec.sample} did not finish in {timeout_s} s of the "
                        "orchestrator's time", pytrace=False)
        found = json.loads(done.stdout)
        return SampleRecord.model_validate(found["record"]), Usage(
            found["cpu_s"], found["grew_kb"], found["peak_kb"], found["wall_s"])

    def bare(self, files: Mapping[str, bytes], script: str,
             env: Mapping[str, str] | None = None) -> str:
        """`script` run in a plain container of the image, with none of the rig's layer:
        `files` (mtime 0, as a sample's tar has them) under /tmp/w. What an attack would
        get from a naive rig."""
        engine = self.executor.engine
        labels = Labels(self.executor.experiment, "attack-proof").as_dict()
        container = engine.client.containers.create(
            self.executor.image.image_id, ["sh", "-c", f"cd /tmp/w && {script}"],
            labels=labels, network_mode="none", environment=dict(env or {}))
        try:
            container.put_archive("/tmp", tar_of({f"w/{k}": v for k, v in files.items()}))
            container.start()
            container.wait(timeout=120)
            return bytes(container.logs(stdout=True, stderr=True)).decode(errors="replace")
        finally:
            container.remove(force=True)

    def forged_pyc(self) -> tuple[str, bytes]:
        """pytest's own rewritten bytecode of a PASSING variant of the protected test,
        compiled in the image, its header set to the restored file's size and the sample
        archive's mtime (0): (file name, bytes)."""
        out = self.bare({PROTECTED: PASSING_VARIANT.encode()},
                        "env -u PYTHONDONTWRITEBYTECODE python3 -m pytest -q -p "
                        f"no:cacheprovider {PROTECTED} >/dev/null; cd tests/__pycache__ && ls "
                        "&& base64 -w0 *.pyc")
        name, data = out.split()
        pyc = base64.b64decode(data)
        return name, pyc[:8] + struct.pack("<II", 0, len(TEST.encode())) + pyc[16:]

    def forged_plain_pyc(self) -> tuple[str, bytes]:
        """The import system's bytecode of a PASSING variant of the protected test (no
        assertion rewriting, as the observer imports pinned files), its header set to the
        restored file's size and the sample archive's mtime (0): (file name, bytes)."""
        out = self.bare({PROTECTED: PASSING_VARIANT.encode()},
                        "python3 -c \"import py_compile; py_compile.compile("
                        "'tests/test_horizon.py', cfile='plain.pyc')\" && base64 -w0 plain.pyc")
        pyc = base64.b64decode(out.strip())
        return ("test_horizon.cpython-311.pyc",
                pyc[:8] + struct.pack("<II", 0, len(TEST.encode())) + pyc[16:])

    def log(self, record: SampleRecord) -> str:
        found = sorted(self.stage.glob(f"samples/*/*/{record.log}"))
        return next(p for p in found if p.parent.parent.name == record.arm).read_text()


def tar_of(files: Mapping[str, bytes]) -> bytes:
    """Files as a tar, world-writable directories, every mtime 0."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name in sorted({d for n in files for d in tree_mod.parents(n)}):
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, 0o777
            tar.addfile(info)
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o666
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def commit(repo: Path, files: Files, message: str) -> str:
    """Write `files` over the working tree (None: delete the path, a whole directory
    too; `Link`: a symlink in place of whatever was there) and commit everything."""
    for name, content in files.items():
        path = repo / name
        if content is None or isinstance(content, Link):
            git(repo, "rm", "-rq", "--cached", "--ignore-unmatch", name)
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            path.unlink(missing_ok=True)
        if content is None:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Link):
            path.symlink_to(content.target)
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty",
        "-m", message)
    return git(repo, "rev-parse", "HEAD")


def verdict(record: SampleRecord) -> tuple[str, str | None]:
    return str(record.verdict), record.reason


def counts(record: SampleRecord) -> tuple[int, int]:
    assert record.counts is not None, record.detail
    return record.counts.passed, record.counts.failed


@contextmanager
def lab_for(engine: Engine, image: BuiltImage, root: Path,
            limits: sandbox.SandboxLimits | None = None) -> Iterator[Lab]:
    """A fresh repository and executor; every container and network of it removed after."""
    repo = root / "repo"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    experiment = f"it-{secrets.token_hex(3)}"
    limits = limits or sandbox.SandboxLimits(cpus=1.0, memory_mb=256, pids=128)
    try:
        with DockerSampleExecutor(engine, repo, experiment, image, limits) as executor:
            yield Lab(repo, executor, root / "stage")
    finally:
        engine.remove_labelled({LABEL_EXPERIMENT: experiment})
    assert engine.labelled("container", {LABEL_EXPERIMENT: experiment}) == []


# Each toolchain image's sample limits in a lab: what its build needs (go's compiler,
# cargo's rustc and linker).
TOOLCHAIN_LIMITS = {"node": sandbox.SandboxLimits(cpus=1.0, memory_mb=512, pids=256),
                    "go": sandbox.SandboxLimits(cpus=2.0, memory_mb=1024, pids=512),
                    "rust": sandbox.SandboxLimits(cpus=2.0, memory_mb=2048, pids=512)}


@contextmanager
def toolchain_lab(engine: Engine, image: str, root: Path, base: Files,
                  message: str = "base: the protected success test fails") -> Iterator[Lab]:
    """A lab in one of our toolchain images (built on first use), `base` committed as its
    base: the bench a module of one runner's attacks or honest changes shares."""
    built = images.build(engine, [image], PlainReporter())[-1]
    with lab_for(engine, built, root, TOOLCHAIN_LIMITS[image]) as found:
        found.base = found.commit(base, message)
        yield found


def snapshot(directory: Path) -> dict[str, str]:
    """Every path under `directory` (not following links) -> what it is and holds."""
    found = {}
    for path in sorted(directory.rglob("*")):
        stat = os.lstat(path)
        kind = "link" if path.is_symlink() else "dir" if path.is_dir() else "file"
        body = (os.readlink(path) if kind == "link" else hashlib.sha256(
            path.read_bytes()).hexdigest() if kind == "file" else "")
        found[str(path.relative_to(directory))] = f"{kind} {oct(stat.st_mode)} {body}"
    return found


def host_target(root: Path) -> tuple[Path, dict[str, str]]:
    """A host directory an attack aims at, with a file in it, and its snapshot."""
    target = root / "host-target"
    (target / "inner").mkdir(parents=True)
    (target / "inner" / "keep.txt").write_text("the host's own file\n")
    return target, snapshot(target)


def tree_object(repo: Path, entries: list[tuple[str, str, str, str]]) -> str:
    """A tree object written as is (`--literally`: duplicates and all); entries are
    (mode, type, sha, name)."""
    body = b"".join(f"{mode} {name}".encode() + b"\0" + bytes.fromhex(sha)
                    for mode, _, sha, name in entries)
    done = subprocess.run(["git", "hash-object", "-t", "tree", "-w", "--literally", "--stdin"],
                          cwd=repo, input=body, capture_output=True, check=True)
    return done.stdout.decode().strip()


def blob(repo: Path, data: bytes) -> str:
    done = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=repo, input=data,
                          capture_output=True, check=True)
    return done.stdout.decode().strip()


def commit_tree(repo: Path, tree: str, parent: str, message: str) -> str:
    return git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit-tree", tree,
               "-p", parent, "-m", message)


def cli_target(root: Path) -> Path:
    """A `make_target` repository (no database) whose change is the horizon's: the base
    on `main` (its protected `tests/test_horizon.py` fails), attacks on branch `attack`."""
    manifest = make_target(root, ["A"], database=False)
    text = manifest.read_text().replace('"tests/test_app.py"', f'"{PROTECTED}"').replace(
        "pytest -q -p no:cacheprovider tests/test_app.py", SUCCESS)
    manifest.write_text(text)
    commit(root, BASE, "base: the protected success test fails")
    git(root, "checkout", "-q", "-b", "attack")
    return root


def oracle(repo: Path, ref: str = "attack") -> list[SampleRecord]:
    """`bakeoff-sandbox oracle` on `ref` (one sample of the success criterion) through
    the real command line; its records. It must exit 0 and leave the tree clean."""
    done = cli(repo, "oracle", "--commit", ref, "--check", "success", "--samples", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    stage = Path(done.stderr.strip().splitlines()[-1].split("records: ", 1)[1])
    assert git(repo, "status", "--porcelain") == ""
    return [SampleRecord.model_validate_json(p.read_text())
            for p in sorted(stage.glob("samples/*/*/*.json"))]
