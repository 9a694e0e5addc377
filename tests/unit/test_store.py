"""The run directory: one module knows its paths (`runner.store.layout`), and its JSON
files are typed records (`runner.store.records`) that read what earlier versions wrote."""

from __future__ import annotations

import ast
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from rig.contract import LockVersion
from rig.errors import RigError
from rig.ratchet import Movement
from rig.sample.oracle import sample_dir, sample_paths
from rig.sample.spec import SampleSpec
from rig.sample.verdict import Verdict
from rig.stats import pass_rate
from runner.commands import proofs
from runner.contract import Baseline
from runner.store import layout
from runner.store.records import (
    GraftResult,
    MergeRecord,
    RatchetMove,
    RecordError,
    load_merge,
    load_stage,
    save_merge,
)
from tests.unit.test_score import record

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "run-dir"
SHA = "ab" * 32

# -- typed records: the files of real runs still read, with the same keys ------------------


def _stage_with(tmp_path: Path, fixture: str, name: str) -> Path:
    stage = tmp_path / "stage"
    stage.mkdir(exist_ok=True)
    shutil.copy(FIXTURES / fixture, stage / name)
    return stage


@pytest.mark.parametrize("fixture", ["demo-cap-horizon.stage.json",
                                     "ratchets-cap-horizon.stage.json",
                                     "ratchets-horizon-units.stage.json"])
def test_a_stage_json_of_a_real_run_reads_and_writes_back_the_same_keys(
        tmp_path: Path, fixture: str) -> None:
    stage = _stage_with(tmp_path, fixture, "stage.json")
    found = load_stage(stage)
    assert found is not None
    assert json.loads(found.model_dump_json(by_alias=True)) == json.loads(
        (FIXTURES / fixture).read_text())


def test_a_stage_json_reads_as_typed_fields(tmp_path: Path) -> None:
    demo = load_stage(_stage_with(tmp_path, "demo-cap-horizon.stage.json", "stage.json"))
    assert demo is not None
    assert (demo.change, demo.contract_version, demo.baseline.verdicts) == (
        "cap-horizon", 1, [Verdict.FAIL] * 3)
    assert demo.reference is not None and demo.reference.pass_rate == 1.0
    assert demo.ratchets == {}
    carried = load_stage(_stage_with(tmp_path, "ratchets-horizon-units.stage.json",
                                     "stage.json"))
    assert carried is not None and carried.reference is None
    assert carried.ratchets["coverage"].value == pytest.approx(86.387, abs=1e-3)
    assert carried.ratchets["lint"].source == (
        "as frozen for cap-horizon (kept: unchanged (lower is better))")


def test_a_stage_json_written_before_ratchets_still_reads(tmp_path: Path) -> None:
    """stage.json had no `ratchets` key before the ratchet checks (commit db5020f)."""
    old = json.loads((FIXTURES / "demo-cap-horizon.stage.json").read_text())
    del old["ratchets"]
    stage = tmp_path / "stage"
    stage.mkdir()
    layout.stage_file(stage).write_text(json.dumps(old))
    found = load_stage(stage)
    assert found is not None and found.ratchets == {}


@pytest.mark.parametrize("fixture", ["demo-cap-horizon.merge.json",
                                     "demo-horizon-units.merge.json",
                                     "ratchets-cap-horizon.merge.json"])
def test_a_merge_json_of_a_real_run_reads_and_writes_back_the_same_keys(
        tmp_path: Path, fixture: str) -> None:
    stage = _stage_with(tmp_path, fixture, "merge.json")
    found = load_merge(stage)
    assert found is not None
    save_merge(stage, found)
    assert json.loads(layout.merge_file(stage).read_text()) == json.loads(
        (FIXTURES / fixture).read_text())


def test_a_merge_json_reads_as_typed_grafts_and_ratchet_moves(tmp_path: Path) -> None:
    demo = load_merge(_stage_with(tmp_path, "demo-cap-horizon.merge.json", "merge.json"))
    assert demo is not None and demo.winner == "fixer" and demo.ratchets == {}
    assert demo.grafts == [GraftResult(
        arm="fixer-graft", what="src/horizon/db.py", verified=True, kept=True,
        rationale="fixer-graft's checks all passed and it changed src/horizon/db.py, "
                  "which the winner did not",
        why="re-verified: success 1.00, tests 1.00, compile 1.00")]
    moved = load_merge(_stage_with(tmp_path, "ratchets-cap-horizon.merge.json", "merge.json"))
    assert moved is not None and moved.grafts == []
    coverage = moved.ratchets["coverage"]
    assert coverage.moved and coverage.measured == coverage.after
    assert (round(coverage.before, 3), round(coverage.after, 3)) == (80.319, 86.387)


def test_a_merge_without_ratchets_writes_no_ratchets_key(tmp_path: Path) -> None:
    """As before the typed record: `ratchets` only when the experiment has ratchets."""
    plain = MergeRecord(change="c", winner=None, head="h" * 40, note="n", grafts=[])
    save_merge(tmp_path, plain)
    assert list(json.loads(layout.merge_file(tmp_path).read_text())) == [
        "change", "winner", "head", "note", "grafts"]
    move = RatchetMove.of(Movement("lint", 2.0, 1.0, 1.0, "moved: 1 is better"))
    save_merge(tmp_path, plain.model_copy(update={"ratchets": {"lint": move}}))
    assert json.loads(layout.merge_file(tmp_path).read_text())["ratchets"] == {
        "lint": {"from": 2.0, "to": 1.0, "measured": 1.0, "moved": True,
                 "why": "moved: 1 is better"}}


def test_a_graft_is_spelled_from_on_disk_and_in_the_scorecard() -> None:
    graft = GraftResult(arm="B", what="docs.md", rationale="r", verified=True, kept=False,
                        why="regressed: success 1.00 -> 0.50")
    assert graft.as_dict() == {"from": "B", "what": "docs.md", "rationale": "r",
                               "verified": True, "kept": False,
                               "why": "regressed: success 1.00 -> 0.50"}


def test_up_writes_stage_json_with_the_keys_it_always_had(tmp_path: Path) -> None:
    """The typed writer gives the file the dict writer of commit 114cc25 gave."""
    proof = proofs.Proof(
        pass_rate([Verdict.FAIL] * 3), ["FAIL", "FAIL", "FAIL"], "ref0" * 10,
        pass_rate([Verdict.PASS] * 3), ["a caveat"],
        {"coverage": Baseline(80.5, "measured on the base (3 samples agree)")})
    version = LockVersion.model_construct(version=2, sha256=SHA)
    proofs.record(tmp_path, "cap", "ba5e" * 10, proof, version)
    assert json.loads(layout.stage_file(tmp_path).read_text()) == {
        "change": "cap", "base_commit": "ba5e" * 10, "contract_version": 2,
        "contract_sha256": SHA,
        "baseline": {"pass_rate": 0.0, "verdicts": ["FAIL", "FAIL", "FAIL"]},
        "reference": {"commit": "ref0" * 10, "pass_rate": 1.0}, "caveats": ["a caveat"],
        "ratchets": {"coverage": {"value": 80.5,
                                  "source": "measured on the base (3 samples agree)"}}}


@pytest.mark.parametrize(("name", "text", "problem"), [
    ("merge.json", '{"change": "c", "head": "h", "note": "", "grafts": []}',
     "is not a valid merge record (merge.json): winner: Field required"),
    ("stage.json", "{not json", "is not a valid stage record (stage.json): the file: "
                                "Invalid JSON"),
])
def test_a_broken_record_is_an_error_naming_the_file_the_field_and_the_fix(
        tmp_path: Path, name: str, text: str, problem: str) -> None:
    (tmp_path / name).write_text(text)
    with pytest.raises(RecordError) as caught:
        (load_merge if name == "merge.json" else load_stage)(tmp_path)
    assert caught.value.exit_code == 2
    assert caught.value.message.startswith(f"{tmp_path / name} {problem}")
    assert caught.value.hint == ("it was edited by hand or written by another version: "
                                 "restore it, or remove the stage's directory and run the "
                                 "stage again")


def test_no_record_yet_is_none(tmp_path: Path) -> None:
    assert (load_stage(tmp_path), load_merge(tmp_path)) == (None, None)


# -- the layout ------------------------------------------------------------------------------


def test_the_sample_paths_are_the_rigs() -> None:
    spec = SampleSpec(change="c", arm="A", check="tests", n=2, commit="c0", base_commit="b0",
                      command="true", parser="pytest", timeout_s=1.0)
    stage = Path("/r/.bakeoff/e/stages/c")
    assert sample_paths(stage, spec) == (layout.sample_record(stage, "A", "tests", 2),
                                         layout.sample_log(stage, "A", "tests", 2))
    assert sample_dir(stage, "A", "tests") == stage / "samples" / "A" / "tests"


def test_the_run_directory_paths() -> None:
    directory = layout.experiment_dir(Path("/r"), "e")
    stage = layout.stage_dir(directory, "c")
    assert directory == Path("/r/.bakeoff/e") and stage == directory / "stages" / "c"
    assert layout.arm_record(directory, "c", "A") == stage / "arms" / "A" / "arm.json"
    assert layout.proofs_dir(stage, SHA) == stage / "proofs" / SHA[:12]
    assert layout.diagnosis_dir(stage, "sha256:0123456789abcdef") == (
        stage / "diagnosis" / "0123456789ab")
    assert layout.judge_answer(stage, "A") == stage / "judge" / "A.json"
    assert layout.tools_cache(directory, "k") == directory / "tools" / "k.json"
    assert (layout.state_file(directory), layout.lock_file(directory)) == (
        directory / "sandboxes.json", directory / "lock")


def test_a_path_inside_a_run_directory_names_its_repository_and_experiment() -> None:
    record_path = Path("/w/repo/.bakeoff/exp/stages/c/samples/A/success/1.json")
    assert layout.run_dir_of(record_path) == (Path("/w/repo"), "exp")
    assert layout.run_dir_of(Path("/w/repo/samples/A/success/1.json")) is None


def test_sample_records_lists_records_only(tmp_path: Path) -> None:
    folder = sample_dir(tmp_path, "A", "coverage")
    (folder / "1.files").mkdir(parents=True)
    for name in ("1.json", "1.log", "1.server.log", "1.canary.jsonl", "1.files/cov.json",
                 "2.json"):
        (folder / name).write_text("{}")
    sample_dir(tmp_path, "B", "tests").mkdir(parents=True)
    (sample_dir(tmp_path, "B", "tests") / "1.json").write_text("{}")
    assert layout.sample_records(tmp_path, "A", "coverage") == [folder / "1.json",
                                                                folder / "2.json"]
    assert len(layout.sample_records(tmp_path)) == 3
    assert layout.sample_arms(tmp_path) == ["A", "B"]
    assert layout.sample_checks(tmp_path, "A") == ["coverage"]


def test_regression_a_broken_baseline_names_where_its_logs_really_are(tmp_path: Path) -> None:
    """The hint said `stages/<change>/samples/baseline/`; the baseline's samples are under
    the proofs of the contract (`proofs/<sha12>/samples/baseline/success/`)."""
    logs = sample_dir(layout.proofs_dir(tmp_path, SHA), "baseline", "success")
    with pytest.raises(RigError) as caught:
        proofs._judge_baseline([record("baseline", "success", 1, "R")], False, logs)
    assert caught.value.hint == ("run `bakeoff-sandbox reproduce` on a baseline sample, or "
                                 f"read its log under {logs}/")


def test_a_broken_baseline_says_what_broke_it(tmp_path: Path) -> None:
    """The first rig error's detail, not only its reason: e.g. the reporter node was asked
    for that the rig cannot read, and how to fix the command."""
    broken = record("baseline", "success", 1, "R").model_copy(update={
        "detail": "no node-test summary in the output: the command asks node for the `dot` "
                  "reporter, which the rig cannot read"})
    with pytest.raises(RigError) as caught:
        proofs._judge_baseline([broken], False, tmp_path)
    assert str(caught.value).splitlines()[0] == (
        f"the baseline is a rig problem, not a task: {broken.verdict}({broken.reason}); "
        f"{broken.detail}")


# -- only the layout spells the run directory ------------------------------------------------

NAMES = {".bakeoff", "stages", "arms", "samples", "judge", "proofs", "diagnosis", "merge",
         "reproduce", "rescore", "brief", "tools", "oracle", "keep", "sandboxes.json", "lock",
         "stage.json", "merge.json", "arm.json", "dispatch.log", "rescore.json", "RESCORE.md",
         "SCORECARD.md", "OBSERVATION.json", "RESULTS.md", "base.bundle", "stack.log"}
PATH_CALLS = {"glob", "rglob", "joinpath", "with_name", "Path"}
OWNER = "runner/store/layout.py"
ALLOWED = {  # (module, name): why it may spell it
    ("rig/sample/oracle.py", "samples"): "the rig's one sample-path helper (it writes the records)",
    ("runner/commands/dispatch/work.py", "base.bundle"):
        "a file inside the work keeper's scratch folder (layout.keep_dir)",
    ("runner/containers/checkout.py", "base.bundle"): "a path inside the keeper container",
}
PENDING: dict[tuple[str, str], str] = {}  # spelled elsewhere, waiting for the layout's function


def _path_strings(tree: ast.Module) -> Iterator[ast.Constant]:
    """Strings used as paths: operands of `/`, arguments of glob/joinpath/Path, and the
    values of module constants (a folder name kept in a constant is still spelled)."""
    used: list[ast.expr] = [item.value for item in tree.body
                            if isinstance(item, ast.Assign | ast.AnnAssign) and item.value]
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            used += [node.left, node.right]
        elif isinstance(node, ast.Call):
            called = node.func
            name = (called.attr if isinstance(called, ast.Attribute)
                    else called.id if isinstance(called, ast.Name) else "")
            if name in PATH_CALLS:
                used += node.args
    for expr in used:
        parts = expr.values if isinstance(expr, ast.JoinedStr) else [expr]
        yield from (p for p in parts if isinstance(p, ast.Constant) and isinstance(p.value, str))


def spellings() -> set[tuple[str, str]]:
    found = set()
    for path in sorted([*(ROOT / "runner").rglob("*.py"), *(ROOT / "rig").rglob("*.py")]):
        module = path.relative_to(ROOT).as_posix()
        if module == OWNER:
            continue
        for text in _path_strings(ast.parse(path.read_text(encoding="utf-8"))):
            found |= {(module, part) for part in str(text.value).split("/") if part in NAMES}
    return found


def test_only_the_layout_spells_the_run_directory() -> None:
    """Every `stages/`, `samples/<arm>/<check>`, `proofs/`, `merge.json`, ... is built by
    `runner.store.layout`; a new spelling elsewhere fails here, and so does an allowance
    no longer needed (the pending ones go when their module calls the layout)."""
    found = spellings()
    assert found - set(ALLOWED) - set(PENDING) == set()
    assert (set(ALLOWED) | set(PENDING)) - found == set()
