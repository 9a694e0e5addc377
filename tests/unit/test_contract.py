"""rig.contract: the grading is frozen with a hash, and any change to it is named.

Contracts are built from a real git repository holding the reference manifest
(tests/unit/bad_manifests/reference.toml), its brief and its protected test file,
exactly as `up` builds them: files at the base commit are read through git.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

import rig.contract
from rig.contract import (
    ABSENT,
    LOCK_FILE,
    Contract,
    build_contract,
    canonical_json,
    contract_sha256,
    diff,
    freeze,
    load_lock,
    verify,
)
from rig.errors import ContractMismatchError, RigError
from runner import contract, workspace
from runner.manifest import load_manifest

REFERENCE = Path(__file__).parent / "bad_manifests" / "reference.toml"
IDENTITY = ("-c", "user.name=bakeoff-test", "-c", "user.email=bakeoff-test@example.invalid")
CHANGE = "changes[cap-horizon]"
PROTECTED = "tests/test_horizon.py"
IMAGE_ID = "sha256:" + "ab" * 32


class Target:
    """A committed target repository with the reference manifest at its root."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "briefs").mkdir(parents=True)
        (root / "tests").mkdir()
        (root / "agents").mkdir()  # the reference's agents_dir
        (root / "bakeoff.toml").write_text(REFERENCE.read_text())
        (root / "briefs" / "cap-horizon.md").write_text("# cap-horizon\n\nSymptom: ...\n")
        (root / PROTECTED).write_text("def test_horizon():\n    assert False\n")
        workspace.run_git(root, "init", "-q", "-b", "main")
        self.base = self.commit()

    def commit(self) -> str:
        workspace.run_git(self.root, "add", "-A")
        workspace.run_git(self.root, *IDENTITY, "commit", "-q", "--allow-empty", "-m", "fixture")
        return workspace.run_git(self.root, "rev-parse", "HEAD")

    def edit(self, relative: str, old: str, new: str) -> None:
        path = self.root / relative
        text = path.read_text()
        assert old in text, f"fixture drift: {old!r} is not in {relative}"
        path.write_text(text.replace(old, new, 1))

    def read_at_base(self, base: str) -> Callable[[str], bytes | None]:
        return lambda path: workspace.file_at(self.root, base, path)

    def resolve(self, ref: str) -> str | None:
        return workspace.commit_of(self.root, ref)

    def contract(self, *, base: str | None = None, image_identity: str = IMAGE_ID) -> Contract:
        base = base or self.base
        return build_contract(
            load_manifest(self.root / "bakeoff.toml"), base_commit=base,
            image_identity=image_identity, read_at_base=self.read_at_base(base),
            resolve_reference=self.resolve,
        )


@pytest.fixture
def target(tmp_path: Path) -> Target:
    return Target(tmp_path / "target")


@pytest.fixture
def state(tmp_path: Path) -> Path:
    """The experiment directory (.bakeoff/<experiment>), not created yet."""
    return tmp_path / "target" / ".bakeoff" / "horizon"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- content and hash ----------------------------------------------------------------


def test_identical_inputs_give_an_identical_sha(target: Target) -> None:
    first, second = target.contract(), target.contract()
    assert canonical_json(first) == canonical_json(second)
    assert re.fullmatch(r"[0-9a-f]{64}", contract_sha256(first))
    assert contract_sha256(first) == contract_sha256(second)
    assert diff(first, second) == []


def test_canonical_json_is_sorted_compact_and_hashes_to_the_sha(target: Target) -> None:
    contract = target.contract()
    text = canonical_json(contract)
    data = json.loads(text)
    assert text == json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert sha256(text.encode()) == contract_sha256(contract)
    assert data["limits"]["dispatch_timeout_s"] == 1800.0
    assert '"dispatch_timeout_s":1800.0' in text  # floats as repr, whatever TOML wrote


def test_the_contract_holds_every_grading_term(target: Target) -> None:
    contract = target.contract()
    change = contract.changes[0]
    brief = (target.root / "briefs" / "cap-horizon.md").read_bytes()
    assert (contract.samples, contract.threshold, contract.judge) == (3, 1.0, "none")
    assert contract.weights.success == 3 and contract.base_commit == target.base
    assert [check.name for check in contract.checks] == ["tests", "compile", "coverage"]
    assert contract.checks[2].metric == "coverage-json:cov.json"
    assert change.success.run == "pytest -q -p no:cacheprovider tests/test_horizon.py"
    assert change.brief_sha256 == sha256(brief)
    assert change.protected == {PROTECTED: sha256((target.root / PROTECTED).read_bytes())}
    assert (change.reference, change.reference_sha256) == ("", "")
    assert contract.toolchain.image_identity == IMAGE_ID
    assert contract.toolchain.requires == ["python3", "pytest", "git"]
    assert contract.ratchet_baselines == {}


EDITS = [
    pytest.param('run = "pytest -q -p no:cacheprovider tests/test_horizon.py"',
                 'run = "pytest -q tests/test_horizon.py"', f"{CHANGE}.success.run",
                 id="success-command"),
    pytest.param("success = 3 ", "success = 4 ", "weights.success", id="weight"),
    pytest.param("samples = 3 ", "samples = 5 ", "samples", id="samples"),
    pytest.param('run = "pytest -q -p no:cacheprovider"\n', 'run = "pytest -q"\n',
                 "checks[tests].run", id="check-command"),
    pytest.param("threshold = 1.0", "threshold = 0.5", "threshold", id="threshold"),
    pytest.param("cpus = 1.0", "cpus = 2.0", "limits.cpus", id="limit"),
    pytest.param('setup = ["pip install -e ."]', 'setup = ["pip install ."]',
                 "toolchain.setup", id="setup"),
    pytest.param("tolerance = 0.0", "tolerance = 0.5", "checks[coverage].tolerance",
                 id="ratchet-tolerance"),
]


@pytest.mark.parametrize(("old", "new", "field"), EDITS)
def test_a_manifest_edit_is_named_by_its_field(
    target: Target, old: str, new: str, field: str
) -> None:
    before = target.contract()
    target.edit("bakeoff.toml", old, new)
    after = target.contract()
    assert diff(before, after) == [field]
    assert contract_sha256(before) != contract_sha256(after)


def test_an_edited_brief_is_named_as_the_brief(target: Target) -> None:
    before = target.contract()
    target.edit("briefs/cap-horizon.md", "Symptom", "Symptom (now with a hint)")
    assert diff(before, target.contract()) == [f"{CHANGE}.brief (brief file changed)"]


def test_a_protected_file_edited_at_the_base_is_named(target: Target) -> None:
    before = target.contract()
    target.edit(PROTECTED, "assert False", "assert True")
    after = target.contract(base=target.commit())
    assert diff(before, after) == [f"{CHANGE}.protected[{PROTECTED}]", "base_commit"]


def test_the_protected_hash_is_read_at_the_base_not_from_the_worktree(target: Target) -> None:
    before = target.contract()
    target.edit(PROTECTED, "assert False", "assert True")  # uncommitted
    assert contract_sha256(target.contract()) == contract_sha256(before)


def test_a_protected_path_absent_at_the_base_is_hashed_as_absent(target: Target) -> None:
    target.edit("bakeoff.toml", 'protected = ["tests/test_horizon.py"]',
                'protected = ["tests/test_horizon.py", "tests/fixtures.json"]')
    protected = target.contract().changes[0].protected
    assert protected["tests/fixtures.json"] == ABSENT


def test_the_image_identity_is_part_of_the_contract(target: Target) -> None:
    rebuilt = target.contract(image_identity="sha256:" + "cd" * 32)
    assert diff(target.contract(), rebuilt) == ["toolchain.image_identity"]


def test_a_reference_patch_is_hashed_by_its_bytes(target: Target) -> None:
    patch = target.root / "reference.patch"
    patch.write_text("--- a/x\n+++ b/x\n")
    target.edit("bakeoff.toml", 'reference = ""', 'reference = "reference.patch"')
    before = target.contract()
    assert before.changes[0].reference_sha256 == sha256(patch.read_bytes())
    patch.write_text("--- a/x\n+++ b/y\n")
    assert diff(before, target.contract()) == [
        f"{CHANGE}.reference (the patch or commit it names changed)"
    ]


def test_a_reference_commit_is_hashed_by_its_resolved_id(target: Target) -> None:
    workspace.run_git(target.root, "branch", "reference-fix", target.base)
    target.edit("bakeoff.toml", 'reference = ""', 'reference = "reference-fix"')
    assert target.contract().changes[0].reference_sha256 == target.base


def test_a_reference_that_names_nothing_is_a_rig_error(target: Target) -> None:
    target.edit("bakeoff.toml", 'reference = ""', 'reference = "main"')
    contract = target.contract()  # loads: main exists
    assert contract.changes[0].reference_sha256 == target.base
    with pytest.raises(RigError, match="neither a patch file nor a commit"):
        build_contract(
            load_manifest(target.root / "bakeoff.toml"), base_commit=target.base,
            image_identity=IMAGE_ID, read_at_base=target.read_at_base(target.base),
            resolve_reference=lambda ref: None,
        )


def test_ratchet_baselines_are_hashed_and_named(target: Target) -> None:
    contract = target.contract()
    with_baseline = contract.model_copy(update={"ratchet_baselines": {"coverage": 81.5}})
    assert contract_sha256(with_baseline) != contract_sha256(contract)
    assert diff(contract, with_baseline) == ["ratchet_baselines[coverage] (added)"]


def test_an_added_check_is_named_as_added(target: Target) -> None:
    before = target.contract()
    with (target.root / "bakeoff.toml").open("a") as manifest:
        manifest.write('\n[[checks]]\nname = "lint"\nrun = "ruff check"\nparser = "exit-code"\n')
    assert diff(before, target.contract()) == ["checks[lint] (added)"]


# --- the lock ---------------------------------------------------------------------------


def test_the_first_freeze_writes_version_1(target: Target, state: Path) -> None:
    contract = target.contract()
    version = freeze(state, contract, refreeze=False)
    data = json.loads((state / LOCK_FILE).read_text())
    assert (version.version, version.reason, version.sha256) == (1, "up", contract_sha256(contract))
    assert data["schema"] == "bakeoff-contract/v1"
    assert [v["version"] for v in data["versions"]] == [1]
    assert data["versions"][0]["sha256"] == contract_sha256(contract)
    assert data["versions"][0]["contract"] == json.loads(canonical_json(contract))
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", data["versions"][0]["frozen_at"])


def test_the_lock_round_trips_to_the_same_sha(target: Target, state: Path) -> None:
    contract = target.contract()
    freeze(state, contract, refreeze=False)
    lock = load_lock(state)
    assert lock is not None
    assert contract_sha256(lock.latest.contract) == contract_sha256(contract)
    assert verify(state, target.contract()).version == 1


def test_freezing_the_same_contract_again_changes_nothing(target: Target, state: Path) -> None:
    first = freeze(state, target.contract(), refreeze=False)
    written = (state / LOCK_FILE).read_bytes()
    assert freeze(state, target.contract(), refreeze=False) == first
    assert freeze(state, target.contract(), refreeze=True) == first
    assert (state / LOCK_FILE).read_bytes() == written


def test_freezing_a_different_contract_without_refreeze_is_refused(
    target: Target, state: Path
) -> None:
    freeze(state, target.contract(), refreeze=False)
    written = (state / LOCK_FILE).read_bytes()
    target.edit("bakeoff.toml", "success = 3 ", "success = 4 ")
    with pytest.raises(ContractMismatchError) as caught:
        freeze(state, target.contract(), refreeze=False)
    assert caught.value.exit_code == 4
    assert caught.value.changed == ["weights.success"]
    assert caught.value.lock == str(state / LOCK_FILE)
    assert "--refreeze" in str(caught.value)
    assert (state / LOCK_FILE).read_bytes() == written


def test_refreeze_keeps_version_1_and_appends_version_2(target: Target, state: Path) -> None:
    old = target.contract()
    freeze(state, old, refreeze=False)
    target.edit("bakeoff.toml", "samples = 3 ", "samples = 4 ")
    new = target.contract()
    version = freeze(state, new, refreeze=True)
    assert (version.version, version.reason) == (2, "refreeze")
    text = (state / LOCK_FILE).read_text()
    assert contract_sha256(old) in text and contract_sha256(new) in text
    lock = load_lock(state)
    assert lock is not None
    assert [(v.version, v.sha256) for v in lock.versions] == [
        (1, contract_sha256(old)), (2, contract_sha256(new)),
    ]
    assert lock.versions[0].contract == old


def test_after_refreeze_the_latest_version_wins(target: Target, state: Path) -> None:
    old = target.contract()
    freeze(state, old, refreeze=False)
    target.edit("bakeoff.toml", 'judge = "none"', 'judge = "command:judge.sh {input}"')
    new = target.contract()
    freeze(state, new, refreeze=True)
    assert verify(state, new).version == 2
    with pytest.raises(ContractMismatchError) as caught:
        verify(state, old)
    assert caught.value.changed == ["judge"]


def test_verify_names_every_changed_field(target: Target, state: Path) -> None:
    freeze(state, target.contract(), refreeze=False)
    target.edit("bakeoff.toml", 'run = "pytest -q -p no:cacheprovider tests/test_horizon.py"',
                'run = "pytest -q tests/test_horizon.py"')
    target.edit("briefs/cap-horizon.md", "Symptom", "Symptom, and the fix")
    with pytest.raises(ContractMismatchError) as caught:
        verify(state, target.contract())
    assert caught.value.changed == [
        f"{CHANGE}.success.run", f"{CHANGE}.brief (brief file changed)",
    ]
    assert f"{CHANGE}.success.run" in str(caught.value)


def test_verify_without_a_lock_says_to_run_up_first(target: Target, state: Path) -> None:
    with pytest.raises(RigError) as caught:
        verify(state, target.contract())
    assert type(caught.value) is RigError and caught.value.exit_code == 3
    assert "bakeoff-sandbox up" in str(caught.value)
    assert str(state / LOCK_FILE) in str(caught.value)
    assert load_lock(state) is None


@pytest.mark.parametrize("content", [
    pytest.param("{not json", id="not-json"),
    pytest.param('{"schema": "bakeoff-contract/v9", "versions": []}', id="unknown-schema"),
    pytest.param('{"schema": "bakeoff-contract/v1", "versions": []}', id="no-versions"),
    pytest.param("[]", id="wrong-shape"),
])
def test_a_corrupt_lock_is_a_rig_error_naming_it_and_is_never_overwritten(
    target: Target, state: Path, content: str
) -> None:
    state.mkdir(parents=True)
    (state / LOCK_FILE).write_text(content)
    for call in (lambda: load_lock(state), lambda: verify(state, target.contract()),
                 lambda: freeze(state, target.contract(), refreeze=True)):
        with pytest.raises(RigError) as caught:
            call()
        assert str(state / LOCK_FILE) in str(caught.value)
        assert caught.value.exit_code == 3
    assert (state / LOCK_FILE).read_text() == content


def test_a_lock_edited_by_hand_fails_its_own_hash(target: Target, state: Path) -> None:
    """Editing the frozen content to match a changed manifest must not pass verify."""
    freeze(state, target.contract(), refreeze=False)
    path = state / LOCK_FILE
    data = json.loads(path.read_text())
    data["versions"][0]["contract"]["samples"] = 5
    path.write_text(json.dumps(data))
    with pytest.raises(RigError, match="does not match its contract"):
        load_lock(state)


def test_rig_contract_imports_neither_git_nor_docker_nor_runner_internals() -> None:
    modules: set[str] = set()
    for source in Path(rig.contract.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.ImportFrom):
                modules.add(node.module or "")
            elif isinstance(node, ast.Import):
                modules |= {alias.name for alias in node.names}
    assert not {m for m in modules if m.split(".")[0] in {"git", "docker", "subprocess"}}
    assert {m for m in modules if m.startswith("runner")} <= {"runner.manifest"}


# --- stacks (compose files of compose/) ------------------------------------------------

STACK_LINE = 'parser = "pytest"\n# server = '


def with_stack(target: Target) -> Path:
    stack = target.root / "compose" / "web.yml"
    stack.parent.mkdir()
    stack.write_text("services:\n  app:\n    image: bakeoff/python\n")
    target.edit("bakeoff.toml", STACK_LINE,
                'parser = "pytest"\nstack = "compose/web.yml"\n# server = ')
    return stack


def test_a_criterion_without_a_stack_hashes_as_before_stacks_existed(target: Target) -> None:
    """Pins that adding `stack` to the contract did not change the hash of a contract
    frozen before (a key `stack: null` would have: every old lock would be exit 4)."""
    data = json.loads(canonical_json(target.contract()))
    assert sorted(data["changes"][0]["success"]) == ["parser", "run", "server"]


def test_the_stack_file_is_hashed_by_its_bytes_and_an_edit_is_named(target: Target) -> None:
    stack = with_stack(target)
    before = target.contract()
    assert before.changes[0].success.stack is not None
    assert before.changes[0].success.stack.model_dump() == {
        "file": "compose/web.yml", "sha256": sha256(stack.read_bytes()), "timeout_s": 60.0,
        "images": {}}  # the runner adds them (test_a_stack_image_rebuilt_to_other_content...)
    stack.write_text(stack.read_text() + "  cache:\n    image: bakeoff/redis\n")
    assert diff(before, target.contract()) == [f"{CHANGE}.success.stack.sha256"]


TOOLCHAIN_LINE = 'env_files = []'


def with_toolchain_stack(target: Target) -> Path:
    stack = target.root / "compose" / "dev.yml"
    stack.parent.mkdir(exist_ok=True)
    stack.write_text("services:\n  redis:\n    image: bakeoff/redis\n")
    target.edit("bakeoff.toml", TOOLCHAIN_LINE,
                'env_files = []\nstack = "compose/dev.yml"\nstack_timeout_s = 30')
    return stack


def test_a_toolchain_without_a_stack_hashes_as_before_arm_stacks_existed(
        target: Target) -> None:
    """Pins that `[toolchain] stack` did not change the hash of a contract frozen before
    it existed (a key `stack: null` under toolchain would make every old lock exit 4)."""
    data = json.loads(canonical_json(target.contract()))
    assert sorted(data["toolchain"]) == ["image", "image_identity", "requires", "setup"]


def test_the_arm_stack_file_is_hashed_by_its_bytes_and_an_edit_is_named(
        target: Target) -> None:
    stack = with_toolchain_stack(target)
    before = target.contract()
    assert before.toolchain.stack is not None
    assert before.toolchain.stack.model_dump() == {
        "file": "compose/dev.yml", "sha256": sha256(stack.read_bytes()), "timeout_s": 30.0,
        "images": {}}  # the runner adds them (test_an_arm_stack_image_rebuilt_...)
    stack.write_text(stack.read_text() + "  cache:\n    image: bakeoff/redis\n")
    assert diff(before, target.contract()) == ["toolchain.stack.sha256"]


def test_an_arm_stack_image_rebuilt_to_other_content_is_a_changed_contract(
        target: Target, tmp_path: Path) -> None:
    """The arms' own stack's service images are frozen by identity like a criterion's
    stack's: a Redis rebuilt to other content after `up` is exit 4, named."""
    from runner import contract as runner_contract
    from runner.containers.images import BuiltImage

    with_toolchain_stack(target)
    image = BuiltImage("python", "bakeoff/python", "sha256:" + "1" * 64, IMAGE_ID, True)
    loaded = load_manifest(target.root / "bakeoff.toml")
    built = runner_contract.build_contract(loaded, "cap-horizon", target.base, image, None,
                                           {"redis": "sha256:aa"})
    assert built.toolchain.stack is not None
    assert built.toolchain.stack.images == {"redis": "sha256:aa"}
    freeze(tmp_path, built, refreeze=False)
    rebuilt = runner_contract.build_contract(loaded, "cap-horizon", target.base, image, None,
                                             {"redis": "sha256:cc"})
    with pytest.raises(ContractMismatchError) as caught:
        verify(tmp_path, rebuilt)
    assert caught.value.changed == ["toolchain.stack.images[redis]"]


def test_a_stack_image_rebuilt_to_other_content_is_a_changed_contract(
        target: Target, tmp_path: Path) -> None:
    """The runner freezes each service's image identity beside the file's hash (as it does
    the toolchain image's): a Redis rebuilt to other content after `up` is exit 4, named."""
    from runner import contract as runner_contract
    from runner.containers.images import BuiltImage

    with_stack(target)
    image = BuiltImage("python", "bakeoff/python", "sha256:" + "1" * 64, IMAGE_ID, True)
    loaded = load_manifest(target.root / "bakeoff.toml")
    built = runner_contract.build_contract(loaded, "cap-horizon", target.base, image,
                                           {"redis": "sha256:aa", "app": "sha256:bb"})
    stack = built.changes[0].success.stack
    assert stack is not None and stack.images == {"app": "sha256:bb", "redis": "sha256:aa"}
    freeze(tmp_path, built, refreeze=False)
    rebuilt = runner_contract.build_contract(loaded, "cap-horizon", target.base, image,
                                             {"redis": "sha256:cc", "app": "sha256:bb"})
    with pytest.raises(ContractMismatchError) as caught:
        verify(tmp_path, rebuilt)
    assert caught.value.changed == [f"{CHANGE}.success.stack.images[redis]"]


# --- what `up` warns about -------------------------------------------------------------


def test_up_warns_of_each_unprotected_file_a_command_names(target: Target) -> None:
    """Issue 30: a file a check's or the criterion's command names is the ARM's in every
    sample; `up` names each one that is not protected, the command, and the exact key
    that would protect it. Protected files, harness, test files and directories are
    silent (the reference manifest's commands name none of those)."""
    manifest = target.root / "bakeoff.toml"
    assert contract.unprotected_named(load_manifest(manifest), "cap-horizon",
                                      target.base) == []
    target.edit("bakeoff.toml", 'run = "python -m compileall -q src"',
                'run = "sh scripts/check.sh && echo todos=$(grep -c TODO app.py)"')
    target.edit("bakeoff.toml", 'protected = ["tests/test_horizon.py"]',
                'protected = ["tests/test_horizon.py", "scripts/lint.sh"]')
    target.edit("bakeoff.toml", 'run = "pytest -q -p no:cacheprovider tests/test_horizon.py"',
                'run = "sh scripts/lint.sh && python3 app.py --selftest"')
    (target.root / "scripts").mkdir()
    for name in ("scripts/check.sh", "scripts/lint.sh", "app.py"):
        (target.root / name).write_text("x\n")
    base = target.commit()
    found = contract.unprotected_named(load_manifest(manifest), "cap-horizon", base)
    protect = ('a file of the base that is not protected: every sample runs or reads the '
               "ARM's {0}, which the arm may change. If it is the grader's own script (not "
               'code under test), protect it: add "{0}" to `protected` of [[changes]] id = '
               '"cap-horizon" (changes[cap-horizon].protected) in bakeoff.toml')
    assert found == [
        f"changes[cap-horizon].success.run names app.py, {protect.format('app.py')}",
        f"checks[compile].run names app.py, {protect.format('app.py')}",
        f"checks[compile].run names scripts/check.sh, {protect.format('scripts/check.sh')}"]
