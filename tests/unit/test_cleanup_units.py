"""Issue 34, item 5, the pure half: which images are ours to remove at `down` and at
`gc --images`, what each kept image says, what a record names, and the branch lines."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from rig.sample.record import SampleRecord
from rig.sample.verdict import Verdict
from runner.commands import cleanup
from runner.containers.backend import LABEL_BUILD_OF, LABEL_IDENTITY, LABEL_IMAGE
from runner.containers.images.inventory import Image, Inventory, experiment_plan, gc_plan
from runner.manifest import load_manifest
from runner.store.layout import experiment_dir
from tests.integration.helpers import make_target

MB = 1_000_000


def sample_record(image: str, image_id: str) -> SampleRecord:
    """A PASS sample of change `first`, arm A, run in `image`."""
    return SampleRecord(
        sample="first/A/success/1", change="first", arm="A", check="success", n=1,
        commit="c0ffee", base_commit="ba5e", image=image, image_id=image_id,
        image_identity="sha256:prepared", command="pytest -q", parser="pytest", env={},
        mounts=[], limits={}, network="none", db_schema=None, protected={}, requires=[],
        exit_code=0, timed_out=False, oom_killed=False, program_present=True, counts=None,
        tests_ran=1, verdict=Verdict.PASS, reason=None, rig_error=None, detail="",
        started_at="2024-01-01T00:00:00+00:00", duration_s=1.0, log="1.log")


def image(id_: str, kind: str | None, identity: str, size_mb: int, parent: str = "",
          tags: tuple[str, ...] = (), **labels: str) -> Image:
    found = {LABEL_IMAGE: kind, LABEL_IDENTITY: identity} if kind else {"org.other": "x"}
    return Image(f"sha256:{id_}", tags, {**found, **labels}, size_mb * MB,
                 f"sha256:{parent}" if parent else "")


# base <- python (and its step) <- prepared P (its step) <- agent layer on P;
# python <- setup stage of P (dangling, build-of P); python <- agent layer on python;
# an old python (untagged, rebuilt since) <- an agent layer on it; a foreign image.
ENGINE = [
    image("base", "base", "sha256:b", 100, tags=("bakeoff/base:bookworm",)),
    image("pystep", "base", "sha256:b", 150, "base"),
    image("python", "python", "sha256:py", 200, "pystep", ("bakeoff/python:latest",)),
    image("pstep", "python", "sha256:py", 200, "python"),
    image("prep", "prepared", "sha256:p1", 230, "pstep", ("bakeoff/prepared:p1",)),
    image("lstep", "prepared", "sha256:p1", 230, "prep"),
    image("layer", "agent", "sha256:l1", 300, "lstep", ("bakeoff/agent:l1",)),
    image("stage", "python", "sha256:py", 260, "python",
          **{LABEL_BUILD_OF: "bakeoff/prepared:p1"}),
    image("pylayer", "agent", "sha256:l2", 290, "python", ("bakeoff/agent:l2",)),
    image("oldpy", "python", "sha256:old", 210, "pystep"),
    image("oldlayer", "agent", "sha256:l3", 280, "oldpy", ("bakeoff/agent:l3",)),
    image("gwold", "gateway", "sha256:g0", 201, "python", ("bakeoff/gateway:g0",)),
    image("gwnew", "gateway", "sha256:g1", 201, "python", ("bakeoff/gateway:g1",)),
    image("theirs", None, "", 50, tags=("example/theirs:1",)),
]


def inventory(users: dict[str, tuple[str, ...]] | None = None) -> Inventory:
    return Inventory({i.id: i for i in ENGINE},
                     {f"sha256:{k}": v for k, v in (users or {}).items()})


def ids(images: list[Image]) -> list[str]:
    return [i.id.removeprefix("sha256:") for i in images]


def current(found: Image) -> bool | None:
    return {"base": True, "python": found.identity == "sha256:py",
            "gateway": found.identity == "sha256:g1"}.get(found.kind or "")


def test_down_removes_the_recorded_prepared_image_its_layer_and_its_build_stage() -> None:
    plan = experiment_plan(inventory(), {"bakeoff/prepared:p1"})
    assert ids(plan.remove) == ["layer", "prep", "stage"]  # the deepest first
    assert plan.kept == []


def test_down_finds_the_prepared_image_by_its_recorded_id_too() -> None:
    assert ids(experiment_plan(inventory(), {"sha256:prep"}).remove) == [
        "layer", "prep", "stage"]


def test_down_keeps_a_prepared_image_another_experiments_container_uses_and_names_it() -> None:
    """The same dependency set gives the same prepared image: another experiment's
    sandbox (on the agent layer built on it) keeps it, and says whose."""
    found = inventory({"layer": ("it-b-A (experiment it-b)",)})
    plan = experiment_plan(found, {"bakeoff/prepared:p1"})
    assert ids(plan.remove) == ["stage"]
    assert [(i.shown, why) for i, why in plan.kept] == [
        ("bakeoff/agent:l1", "in use by it-b-A (experiment it-b)"),
        ("bakeoff/prepared:p1", "in use by it-b-A (experiment it-b)")]


def test_down_touches_nothing_its_records_do_not_name() -> None:
    assert experiment_plan(inventory(), {"bakeoff/python:latest", "sha256:python"}) \
        .remove == []


def test_gc_removes_what_no_one_uses_and_this_version_would_not_build() -> None:
    plan = gc_plan(inventory(), current)
    assert ids(plan.remove) == ["layer", "prep", "stage", "oldlayer", "gwold"]
    assert [(i.shown, why) for i, why in plan.kept] == [
        ("bakeoff/agent:l2", "built on bakeoff/python:latest, which stays"),
        ("bakeoff/base:bookworm", "what this version builds"),
        ("bakeoff/gateway:g1", "what this version builds"),
        ("bakeoff/python:latest", "what this version builds")]


def test_gc_keeps_an_old_identity_a_container_uses() -> None:
    plan = gc_plan(inventory({"gwold": ("it-c-gateway (experiment it-c)",)}), current)
    assert "gwold" not in ids(plan.remove)
    assert ("bakeoff/gateway:g0", "in use by it-c-gateway (experiment it-c)") in [
        (i.shown, why) for i, why in plan.kept]


def test_gc_leaves_a_kind_it_does_not_build_and_never_lists_an_image_not_ours() -> None:
    found = Inventory({**inventory().images, "sha256:mine": image(
        "mine", "someone-elses", "sha256:m", 10, tags=("bakeoff/mine:1",))})
    plan = gc_plan(found, current)
    assert ("bakeoff/mine:1", "not an image this version builds; left as it is") in [
        (i.shown, why) for i, why in plan.kept]
    every = [i.id for i in plan.remove] + [i.id for i, _ in plan.kept]
    assert "sha256:theirs" not in every


def test_freed_is_each_images_own_layers() -> None:
    found = inventory()
    assert [found.own_size(found.images[f"sha256:{i}"]) // MB
            for i in ("prep", "layer", "stage", "gwold")] == [30, 70, 60, 1]


def test_lines_say_each_image_removed_with_its_size_and_each_kept_with_why() -> None:
    found = inventory()
    report = cleanup.ImageReport(
        [(found.images["sha256:prep"], 30 * MB), (found.images["sha256:stage"], 61_250_000)],
        [(found.images["sha256:layer"], "--keep-images")])
    assert cleanup.image_lines(report) == [
        "removed image bakeoff/prepared:p1 (prep), 30.0 MB",
        "removed image <none> (stage), 61.2 MB",
        "kept image bakeoff/agent:l1 (layer): --keep-images",
        "images: removed 2, freed 91.2 MB"]
    dry = cleanup.ImageReport(report.removed, [], dry_run=True)
    assert cleanup.image_lines(dry)[-1] == "images: would remove 2, would free 91.2 MB"


def test_recorded_images_are_every_image_and_image_id_in_the_records(tmp_path: Path) -> None:
    samples = tmp_path / "stages" / "first" / "samples" / "A" / "success"
    samples.mkdir(parents=True)
    record = sample_record("bakeoff/prepared:p1", "sha256:prep")
    (samples / "1.json").write_text(record.model_dump_json())
    (samples / "2.json").write_text('{"partial')  # a torn write is no record
    (tmp_path / "arm.json").write_text(json.dumps({"arm": "A", "image_id": "sha256:layer"}))
    assert cleanup.recorded_images(tmp_path, None) == {
        "bakeoff/prepared:p1", "sha256:prep", "sha256:layer"}
    assert cleanup.recorded_images(tmp_path / "missing", None) == set()


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True,
                          text=True).stdout.strip()


def test_down_branches_deletes_a_recorded_branch_and_refuses_the_checked_out_and_the_unrecorded(
        tmp_path: Path) -> None:
    """`down --branches`: an arm's branch whose commits the records name goes; the
    branch checked out (in a worktree) and one holding a commit no record names (the
    user's own work on it) stay, each said with why."""
    loaded = load_manifest(make_target(tmp_path / "repo", ["A", "B"], database=False))
    repo, name = loaded.repo_path, loaded.manifest.experiment.name
    base = _git(repo, "rev-parse", "HEAD")
    for arm in ("A", "B"):
        _git(repo, "checkout", "-q", "-b", f"bakeoff-arms/{name}/first/{arm}", base)
        (repo / f"{arm}.py").write_text(f"ARM = {arm!r}\n")
        _git(repo, "add", "-A")
        _git(repo, "commit", "-qm", f"arm {arm}")
    tips = {arm: _git(repo, "rev-parse", f"bakeoff-arms/{name}/first/{arm}") for arm in "AB"}
    (repo / "B.py").write_text("ARM = 'mine'\n")
    _git(repo, "commit", "-qam", "the user's own commit, in no record")
    _git(repo, "checkout", "-q", "main")
    _git(repo, "branch", f"bakeoff/{name}", base)
    worktree = tmp_path / "wt"
    _git(repo, "worktree", "add", "-q", str(worktree), f"bakeoff/{name}")
    samples = experiment_dir(repo, name) / "stages" / "first" / "samples"
    for arm in "AB":
        (samples / arm / "success").mkdir(parents=True)
        record = sample_record("bakeoff/prepared:p1", "sha256:prep").model_copy(
            update={"arm": arm, "commit": tips[arm], "base_commit": base})
        (samples / arm / "success" / "1.json").write_text(record.model_dump_json())
    found = cleanup.branches_left(loaded)
    assert [(b.name, b.why) for b in found] == [
        (f"bakeoff-arms/{name}/first/A", "arm A's commits for change first"),
        (f"bakeoff-arms/{name}/first/B", "arm B's commits for change first"),
        (f"bakeoff/{name}", "the experiment branch: the merged result of every change")]
    report = cleanup.delete_branches(loaded, found)
    assert cleanup.deleted_lines(loaded, report) == [
        f"deleted branch bakeoff-arms/{name}/first/A (was {tips['A'][:12]})",
        f"kept branch bakeoff-arms/{name}/first/B: 1 commit(s) on it are in no record of "
        f"the experiment: see `git -C {repo} log bakeoff-arms/{name}/first/B`, then "
        f"`git -C {repo} branch -D bakeoff-arms/{name}/first/B`",
        f"kept branch bakeoff/{name}: checked out in {worktree}",
        f"the records under {experiment_dir(repo, name)} still name those commits, now on "
        "no branch: `git gc` prunes such commits after two weeks (gc.pruneExpire), and then "
        "`reproduce` and `rescore` of this experiment cannot run"]
    assert _git(repo, "branch", "--list", "bakeoff*", "--format=%(refname:short)").split() \
        == [f"bakeoff-arms/{name}/first/B", f"bakeoff/{name}"]


def test_branch_lines_name_each_branch_why_and_the_commands_that_delete_them(
        tmp_path: Path) -> None:
    loaded = load_manifest(make_target(tmp_path / "repo", ["A"], database=False))
    name = loaded.manifest.experiment.name
    assert cleanup.branch_lines(loaded, []) == []
    found = [cleanup.Branch(f"bakeoff-interrupted/{name}/first/A/attempt-1", "f" * 40,
                            "arm A's work when its dispatch was cut (attempt-1, change first)")]
    assert cleanup.branch_lines(loaded, found) == [
        f"branches left in {loaded.repo_path} (their commits are what the records name: "
        "kept so the result can be audited, re-scored and reproduced):",
        f"  bakeoff-interrupted/{name}/first/A/attempt-1: arm A's work when its dispatch "
        "was cut (attempt-1, change first)",
        "delete them when you are done: bakeoff-sandbox down --branches, or git -C "
        f"{loaded.repo_path} branch -D bakeoff-interrupted/{name}/first/A/attempt-1"]
