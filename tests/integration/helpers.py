"""Helpers for integration tests: target repositories, manifests, cleanup by label."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from runner.commands import down as down_mod
from runner.commands import up as up_mod
from runner.containers.backend import LABEL_EXPERIMENT, ContainerSpec
from runner.containers.engine import Engine
from runner.containers.images import BuiltImage
from runner.manifest import LoadedManifest

# What OBSERVATION.json says of one run's machine, not of the arms' work: two runs of the
# same experiment differ in it (an arm's headroom: its samples' peak memory, CPU time).
PER_RUN_ARM_KEYS = ("headroom",)


def measured(observation: str | dict[str, Any]) -> dict[str, Any]:
    """OBSERVATION.json (its text or its JSON) without each arm's `PER_RUN_ARM_KEYS`: what
    two runs of the same experiment must agree on."""
    found: dict[str, Any] = json.loads(observation if isinstance(observation, str)
                                       else json.dumps(observation))
    for round_ in found["rounds"]:
        for arm in round_["arms"]:
            for key in PER_RUN_ARM_KEYS:
                arm.pop(key, None)
    return found


class PlainReporter:
    def start(self, name: str) -> None: ...
    def line(self, name: str, text: str) -> None: ...
    def done(self, image: BuiltImage) -> None: ...



def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


ARM_TEMPLATE = """
[[arms]]
id = "{arm}"
model = "scripted-{arm}"
effort = "unknown"
effort_normalized = "unknown"
effort_provenance = "unknown"
effort_evidence = "scripted contestant; no effort setting exists"
mode = "single_agent"
agent = "command"
command = "{command}"
control = {control}
network = "{network}"
"""

MANIFEST = """
[experiment]
name = "{name}"
repo = "."
base = "main"

[contract]
metric = "pass-rate of the success criterion over fresh-container samples"
samples = 3
judge = "none"

[toolchain]
image = "python"
requires = ["python3", "pytest", "git"]

[limits]
cpus = 1.0
memory_mb = {memory_mb}
pids = {pids}
check_timeout_s = 60

{database}

[[changes]]
id = "first"
brief = "briefs/first.md"
protected = ["tests/test_app.py"]

[changes.success]
run = "pytest -q -p no:cacheprovider tests/test_app.py"
parser = "pytest"
"""


def make_target(root: Path, arms: list[str], *, database: bool = True, memory_mb: int = 256,
                pids: int = 128, name: str | None = None, egress: tuple[str, ...] = ()) -> Path:
    """A small committed Python repo with a manifest; returns the manifest path."""
    name = name or f"it-{secrets.token_hex(3)}"
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "test@bakeoff.invalid")
    git(root, "config", "user.name", "test")
    (root / "briefs").mkdir()
    (root / "briefs" / "first.md").write_text("Make the test pass.\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_app.py").write_text("def test_app():\n    assert 1 + 1 == 3\n")
    (root / "app.py").write_text("VALUE = 1\n")
    db = '[database]\nimage = "postgres"\nurl_env = "DATABASE_URL"' if database else ""
    text = MANIFEST.format(name=name, memory_mb=memory_mb, pids=pids, database=db)
    text += "".join(ARM_TEMPLATE.format(arm=a, control=str(i == 0).lower(), command="true",
                                        network="egress" if a in egress else "none")
                    for i, a in enumerate(arms))
    (root / "bakeoff.toml").write_text(textwrap.dedent(text))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    return root / "bakeoff.toml"


# A scripted judge that prefers arm A (5 against 4 on every dimension), so A wins a round
# both arms solve (equal totals would be a tie, and no winner).
JUDGE_PREFERS_A = """import json, sys
arm = json.load(open(sys.argv[1]))["arm"]
print(json.dumps({d: {"score": 5 if arm == "A" else 4, "evidence": f"scripted: {arm}"}
                  for d in ("diagnosis", "plan", "code_quality", "intent")}))
"""

# The head of a judged two-service experiment (Postgres, the scripted judge): the tests
# that stop and resume a whole `run` add their [[changes]] and arms to it.
JUDGED_MANIFEST = """
[experiment]
name = "{name}"

[contract]
metric = "pass-rate of the success criterion"
samples = 3
judge = "command:python3 judge.py {{input}}"

[toolchain]
image = "python"
requires = ["python3", "pytest", "git"]

[limits]
memory_mb = 512
pids = 128
check_timeout_s = 60
dispatch_timeout_s = {dispatch_timeout_s}

[database]
image = "postgres"
"""


def arms_toml(arms: list[tuple[str, str, str]]) -> str:
    """`[[arms]]` tables for (id, network, shell command); the first is the control."""
    return "".join(ARM_TEMPLATE.format(arm=arm, control=str(i == 0).lower(), network=network,
                                       command=command.replace('"', '\\"'))
                   for i, (arm, network, command) in enumerate(arms))


def committed_repo(repo: Path, files: dict[str, str], manifest: str) -> Path:
    """`repo` made a git repository of `files` and `bakeoff.toml` (`manifest`), one commit
    on main; returns the manifest's path."""
    repo.mkdir(parents=True)
    for path, text in {**files, "bakeoff.toml": textwrap.dedent(manifest)}.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    return repo / "bakeoff.toml"


def cleanup(engine: Engine, loaded: LoadedManifest) -> None:
    try:
        down_mod.down(engine, loaded)
    finally:
        engine.remove_labelled({LABEL_EXPERIMENT: loaded.manifest.experiment.name})


# The sandbox core's own tests skip the proofs (preflight, baseline, reference) that `up`
# runs before making sandboxes; the CLI tests and the contract tests run them for real.
CORE = up_mod.UpOptions(prove=False)


def cli(repo: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`bakeoff-sandbox ARGS...` run in `repo` through the real command line."""
    return subprocess.run([sys.executable, "-m", "runner.cli", *args], cwd=repo,
                          capture_output=True, text=True, timeout=timeout, check=False)


def flat_record(path: Path) -> dict[str, Any]:
    """A sample record's JSON as one dict of its facts (on disk they are in parts:
    asked, ran, graded)."""
    found: dict[str, Any] = json.loads(path.read_text())
    flat = {k: v for k, v in found.items() if k not in ("asked", "ran", "graded")}
    for part in ("asked", "ran", "graded"):
        flat.update(found.get(part) or {})
    return flat


def created(engine: Engine, spec: ContainerSpec) -> Any:
    """The docker container the engine created for `spec` (through the choke point), for
    a test that inspects the engine directly."""
    return engine.client.containers.get(engine.create(spec))
