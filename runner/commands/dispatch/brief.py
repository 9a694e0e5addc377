"""The brief: identical for every arm, written into each sandbox outside the checkout.

Its text is the change's brief file (symptom + acceptance criteria) followed by the
repository guardrails, then what will be the base's at scoring, concretely for this
repository and change (`rig.guards.harness_stated.stated`: the protected files, the base's harness
files, the rules that decide what a sample takes from the base), so no rule that decides
a verdict is one the arms were not given. Nothing in it names an arm, so it is
byte-identical across arms (its sha256 is recorded with every arm; the contract hashes the
brief file and the base commit, from which the rest follows); the
per-arm test-user id comes in `$BAKEOFF_TEST_USER`. It lives at `BRIEF_PATH`, outside
/work so it is never committed: the stage's `brief/` directory on the host, written once
per dispatch and mounted READ-ONLY into every sandbox, so no agent can rewrite it.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from rig.guards import harness_stated
from runner import contract
from runner.containers.samples.tree import read_tree
from runner.errors import BadInputError
from runner.manifest import LoadedManifest
from runner.store import layout

BRIEF_DIR = "/tmp/bakeoff"
BRIEF_PATH = f"{BRIEF_DIR}/brief.md"
TEST_USER_ENV = "BAKEOFF_TEST_USER"

GUARDRAILS = f"""\
## Repository guardrails

These rules are the same for everyone working on this change.

- Work only in /work (your checkout of the repository).
- No pushes and no deploys.
- Never use `--no-verify`.
- No DDL outside your own database schema.
- Your unique test-user id is `<experiment>-<arm>`, given in `${TEST_USER_ENV}`: use it for
  any test data you create, and clean up only by that id.
- Verify by running, and commit your work.
"""


@dataclass(frozen=True)
class Brief:
    change: str
    text: str          # what every agent reads: the brief file, then the guardrails
    file_sha256: str   # of the brief file's bytes alone

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


def compose_brief(loaded: LoadedManifest, change_id: str, base: str) -> Brief:
    """The change's brief file, the guardrails, then what is the base's at scoring (read
    from the `base` commit's tree in git's objects, and its `protected` files)."""
    path = loaded.brief_path(change_id)
    try:
        raw = path.read_bytes()
        body = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise BadInputError(f"{loaded.path}: changes[{change_id}].brief: cannot read {path} "
                            f"({error})", hint="point brief at a UTF-8 text file") from error
    return Brief(change_id, f"{body.rstrip()}\n\n---\n\n{GUARDRAILS}\n"
                            f"{scoring(loaded, change_id, base)}",
                 hashlib.sha256(raw).hexdigest())


def scoring(loaded: LoadedManifest, change_id: str, base: str) -> str:
    """What a sample takes from the base instead of the arm's tree
    (`rig.guards.harness_stated.stated`, the very predicates `rig.guards.harness.pin`
    applies, so the statement cannot drift)."""
    tree = read_tree(loaded.repo_path, base)
    return harness_stated.stated(tree, contract.protected_paths(loaded, change_id, base))


def arm_test_user(experiment: str, arm: str) -> str:
    return f"{experiment}-{arm}"


def brief_dir(stage: Path) -> Path:
    """The brief as the stage keeps it (every sandbox reads its copy from a volume of the
    engine's at BRIEF_DIR: `runner.containers.arms.put_brief`)."""
    return layout.brief_dir(stage)


def write_brief(stage: Path, brief: Brief) -> Path:
    """The brief, read-only, replaced atomically (sandboxes see the new file at once)."""
    folder = brief_dir(stage)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / BRIEF_PATH.rsplit("/", 1)[1]
    tmp = folder / f".{target.name}.{os.getpid()}.tmp"
    tmp.write_bytes(brief.text.encode("utf-8"))
    tmp.chmod(0o444)
    os.replace(tmp, target)
    return target
