"""A merge never weakens the guardrail (issue 20, class 10): a graft is judged by rate AND
by test id (`rig.graft`), harness files are never grafted (`rig.graft.harness_paths`,
`runner.workspace.merge.candidates`, `--graft`), and the round's flags name the arm and
its harness files. Pure, and real git for the branch's mechanics (no docker)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from rig import graft
from rig.guards import harness
from rig.rubric import score_arm
from rig.sample.record import SampleCounts, SampleRecord
from rig.sample.tree import Entry, Kind
from rig.standings import FLAG_FILES, describe_flag, flags
from runner.commands import merge as merge_mod
from runner.errors import BadInputError
from runner.workspace import merge
from tests.trees import write_files
from tests.unit.test_score import WEIGHTS, arm_of, record, result


def file(text: str) -> Entry:
    return Entry(Kind.FILE, text.encode())


def sample(check: str, n: int, tests: dict[str, str], *, letter: str = "P",
           parser: str = "pytest", passed: int | None = None) -> SampleRecord:
    rows: list[dict[str, str | bool]] = [{"id": i, "status": s} for i, s in tests.items()]
    counts = None if passed is None else SampleCounts(passed=passed, failed=0, skipped=0,
                                                      errors=0)
    return record("B", check, n, letter).model_copy(update={"tests": rows, "parser": parser,
                                                            "counts": counts})


def samples(check: str, *runs: dict[str, str], parser: str = "pytest") -> list[SampleRecord]:
    return [sample(check, n, tests, parser=parser) for n, tests in enumerate(runs, 1)]


FIVE = {f"src/cart.test.ts > cart > protected {i}": "passed" for i in range(5)}
OTHERS = {f"src/other.test.ts > t{i}": "passed" for i in range(362)}


# -- by id ---------------------------------------------------------------------------------


def test_the_vitest_pattern_graft_of_the_issue_keeps_every_rate_and_loses_five_ids() -> None:
    """The issue's merge: 367 tests before, 362 after (a `testNamePattern` skipped the five
    protected ones), every sample still PASS: the rate floor holds, the ids do not."""
    before = {"tests": samples("tests", {**OTHERS, **FIVE}, {**OTHERS, **FIVE})}
    after = {"tests": samples("tests", OTHERS, OTHERS)}
    judged = graft.judge({"tests": 1.0}, before, after)
    assert judged.worse == []
    assert judged.kept is False
    found = judged.ids["tests"]
    assert (found.compared, found.lost_count) == (367, 5)
    assert [(lost.id, lost.after) for lost in found.lost] == [
        (test, ("absent",)) for test in sorted(FIVE)]
    assert judged.why().startswith("lost by id: tests: 5 of 367 test(s) that passed before "
                                   "did not pass after: src/cart.test.ts > cart > protected 0 "
                                   "(absent)")


def test_a_runner_that_names_no_passing_test_is_held_to_its_count() -> None:
    """vitest's default reporter names only failing tests: the same graft, seen through
    the counts alone (367 passed in every sample before, 362 after), is dropped too."""
    before = {"tests": [sample("tests", n, {}, parser="vitest", passed=367) for n in (1, 2)]}
    after = {"tests": [sample("tests", 1, {}, parser="vitest", passed=367),
                       sample("tests", 2, {}, parser="vitest", passed=362)]}
    judged = graft.judge({"tests": 1.0}, before, after)
    assert (judged.worse, judged.kept) == ([], False)
    assert judged.why() == ("lost by count: tests: 367 test(s) passed in every sample "
                            "before, 362 in a sample after")
    assert judged.ids["tests"].note == ("by count only: the runner's output named no test "
                                        "that passed in every sample before")


def test_a_count_that_held_keeps_a_graft_said_to_be_by_count_only() -> None:
    before = {"tests": [sample("tests", 1, {}, parser="jest", passed=12)]}
    after = {"tests": [sample("tests", 1, {}, parser="jest", passed=13)]}
    judged = graft.judge({"tests": 1.0}, before, after)
    assert judged.kept and judged.ids["tests"].passed == (12, 13)
    assert judged.why().endswith("by id: tests by count only: the runner's output named no "
                                 "test that passed in every sample before")


def test_ids_and_counts_are_both_held_to() -> None:
    """Every held id passed, yet a sample passed fewer tests than any before (ids past
    the record's bound, say): dropped by count."""
    before = [sample("tests", 1, {"t::a": "passed"}, passed=30001)]
    after = [sample("tests", 1, {"t::a": "passed"}, passed=20001)]
    found = graft.by_id("tests", before, after)
    assert (found.lost, found.fewer, found.regressed) == ((), True, True)


@pytest.mark.parametrize(("after", "how"), [
    ({"t::a": "skipped", "t::b": "passed"}, ("skipped",)),
    ({"t::a": "failed", "t::b": "passed"}, ("failed",)),
    ({"t::a": "error", "t::b": "passed"}, ("error",)),
    ({"t::a": "xfailed", "t::b": "passed"}, ("xfailed",)),
    ({"t::a": "xpassed", "t::b": "passed"}, ("xpassed",)),  # newly marked xfail
    ({"t::b": "passed"}, ("absent",)),
])
def test_a_test_that_passed_before_and_does_not_after_is_lost(
        after: dict[str, str], how: tuple[str, ...]) -> None:
    before = samples("tests", {"t::a": "passed", "t::b": "passed"})
    found = graft.by_id("tests", before, samples("tests", after))
    assert [(lost.id, lost.after) for lost in found.lost] == [("t::a", how)]
    assert (found.compared, found.lost_count, found.note) == (2, 1, "")


def test_every_sample_after_must_pass_it_and_each_way_it_did_not_is_named() -> None:
    before = samples("tests", {"t::a": "passed"}, {"t::a": "passed"})
    after = samples("tests", {"t::a": "passed"}, {"t::a": "skipped"}, {})
    assert graft.by_id("tests", before, after).lost == (graft.Lost("t::a",
                                                                   ("absent", "skipped")),)


def test_only_ids_that_passed_in_every_sample_before_are_held_to() -> None:
    """A test flaky before the graft, or one that skipped, holds nothing; an xpass before
    may be a pass after; new tests after are welcome."""
    before = samples("tests", {"t::flaky": "passed", "t::x": "xpassed", "t::s": "skipped"},
                     {"t::flaky": "failed", "t::x": "xpassed", "t::s": "skipped"})
    after = samples("tests", {"t::flaky": "failed", "t::x": "passed", "t::new": "passed"})
    found = graft.by_id("tests", before, after)
    assert (found.compared, found.lost, found.note) == (1, (), "")


def test_no_sample_after_loses_every_id() -> None:
    found = graft.by_id("tests", samples("tests", {"t::a": "passed"}), [])
    assert found.lost == (graft.Lost("t::a", ("absent",)),)


@pytest.mark.parametrize(("before", "note"), [
    (samples("compile", {}, parser="exit-code"),
     "rates only: the exit-code parser reports no test ids"),
    (samples("tests", {}), "rates only: no test passed in every sample before the graft, so "
                           "no id is held to"),
    ([sample("lint", 1, {"t::a": "passed"}).model_copy(update={"metric_base": 3.0})],
     "rates only: a ratchet is judged by its metric"),
])
def test_a_check_without_ids_is_judged_by_rate_only_and_says_so(
        before: list[SampleRecord], note: str) -> None:
    found = graft.by_id(before[0].check, before, [])
    assert (found.compared, found.lost, found.note) == (0, (), note)
    judged = graft.judge({before[0].check: 1.0}, {before[0].check: before},
                         {before[0].check: [sample(before[0].check, 1, {})]})
    assert judged.kept and f"{before[0].check} {note}" in judged.why()


def test_the_lost_list_is_bounded_and_the_message_names_five() -> None:
    before = samples("tests", {f"t::{i:03}": "passed" for i in range(300)})
    found = graft.by_id("tests", before, samples("tests", {}))
    assert (found.lost_count, len(found.lost)) == (300, graft.LOST_KEPT)
    assert found.text().endswith("t::004 (absent) (+295 more)")
    assert found.text().count("(absent)") == graft.LOST_SHOWN


def test_a_rate_below_the_winners_drops_the_graft_even_when_every_id_held() -> None:
    before = {"success": samples("success", {"t::a": "passed"})}
    after = {"success": [sample("success", 1, {"t::a": "passed"}),
                         sample("success", 2, {"t::a": "passed"}, letter="F")]}
    judged = graft.judge({"success": 1.0}, before, after)
    assert (judged.kept, judged.worse) == (False, ["success 1.00 -> 0.50"])
    assert judged.why() == "regressed: success 1.00 -> 0.50"


def test_a_rig_error_after_the_graft_verified_nothing_and_keeps_nothing() -> None:
    """Rates leave a RIG_ERROR sample out (1 of 1 graded passed); the graft is still not
    verified, and the ids are judged on the graded samples only (not `absent`)."""
    before = {"tests": samples("tests", {"t::a": "passed"}, {"t::a": "passed"})}
    broken = record("B", "tests", 2, "R").model_copy(update={"rig_error": "infra"})
    after = {"tests": [sample("tests", 1, {"t::a": "passed"}), broken]}
    judged = graft.judge({"tests": 1.0}, before, after)
    assert (judged.worse, judged.lost, judged.kept) == ([], [], False)
    assert judged.why() == ("not verified: RIG_ERROR in cap/B/tests/2 (infra) (a rig fault, "
                            "not the graft's: fix the rig and merge again)")


def test_a_graft_that_holds_everything_is_kept_and_says_what_it_compared() -> None:
    before = {"success": samples("success", {"t::a": "passed"}),
              "compile": samples("compile", {}, parser="exit-code")}
    after = {"success": samples("success", {"t::a": "passed", "t::new": "passed"}),
             "compile": samples("compile", {}, parser="exit-code")}
    judged = graft.judge({"success": 1.0, "compile": 1.0}, before, after)
    assert judged.kept
    assert judged.why() == ("re-verified: success 1.00, compile 1.00; by id: success 1 held, "
                            "compile rates only: the exit-code parser reports no test ids")


# -- harness -------------------------------------------------------------------------------

HEAD = {"app.py": file("VALUE = 2\n"), "checks/test_more.py": file("from helpers import x\n"),
        "checks/helpers.py": file("x = 1\n"), "tests/test_app.py": file("def test_app(): 0\n"),
        "vitest.config.mts": file("export default { test: { setupFiles: ['test/setup.ts'] } }"),
        "test/setup.ts": file("// base\n"), "go.mod": file("module x\n"),
        "calc/calc_test.go": file("package calc\n")}


@pytest.mark.parametrize(("path", "text", "why"), [
    ("vitest.config.mts", "export default { test: { testNamePattern: '^(?!protected)' } }",
     graft.BY_NAME),
    ("tests/conftest.py", "import pytest\n", graft.BY_NAME),
    ("pytest.ini", "[pytest]\naddopts = -k 'not test_app'\n", graft.BY_NAME),
    ("package.json", '{"scripts": {"test": "vitest --run -t nothing"}}', graft.BY_NAME),
    ("Cargo.toml", "[package]\nname = 'x'\n", graft.BY_NAME),
    ("go.mod", "module x\n\nreplace y => ./fake\n", graft.BY_NAME),
    ("checks/__pycache__/helpers.cpython-311.pyc", "\x00", graft.BY_NAME),
    ("checks/__init__.py", "", graft.IN_CONTEXT),       # the test directory made a package
    ("checks/json.py", "", graft.IN_CONTEXT),           # shadows the standard library
    ("test/setup.ts", "// forged\n", graft.IN_CONTEXT),  # the base's vitest config names it
    ("calc/zz_test.go", "package calc\n\nfunc TestMain(m *testing.M) {}\n", graft.IN_CONTEXT),
])
def test_a_harness_file_of_any_runner_is_found_in_the_graft(path: str, text: str,
                                                            why: str) -> None:
    grafted = {**HEAD, path: file(text)}
    assert graft.harness_paths(grafted, dict(HEAD)) == {path: why}


def test_a_real_file_or_a_deleted_test_helper_is_no_harness() -> None:
    grafted = {**HEAD, "app.py": file("VALUE = 3\n"), "docs/notes.md": file("why\n")}
    del grafted["checks/helpers.py"]
    assert graft.harness_paths(grafted, dict(HEAD)) == {}


def test_a_module_the_image_python_answers_to_is_harness_beside_a_test() -> None:
    grafted = {**HEAD, "checks/attr.py": file("")}
    assert graft.harness_paths(grafted, dict(HEAD)) == {}
    assert graft.harness_paths(grafted, dict(HEAD), {"attr"}) == {
        "checks/attr.py": graft.IN_CONTEXT}


# -- the tests that judge a graft ----------------------------------------------------------


@pytest.mark.parametrize(("path", "expected"), [
    ("tests/test_cart.py", True), ("pkg/cart_test.py", True), ("calc/calc_test.go", True),
    ("tests/integration.rs", True), ("src/cart.test.ts", True), ("src/cart.spec.mjs", True),
    ("src/__tests__/cart.js", True), ("test/cart-test.cjs", True),
    ("checks/helpers.py", False), ("src/cart.ts", False), ("src/testing.py", False),
    ("docs/test_plan.md", False),
])
def test_test_files_by_the_runners_naming(path: str, expected: bool) -> None:
    assert harness.is_test_file(path) is expected


def test_a_graft_that_rewrites_or_removes_a_test_the_branch_has_is_refused() -> None:
    """Attack: an eligible arm rewrites `test_one` to `assert True` (its ids still pass,
    its rate holds): verified by the very tests it changed, it is refused before."""
    onto = {"checks/test_more.py": file("def test_one(): ...\n"),
            "checks/helpers.py": file("x = 1\n"), "spec/cart.js": file("")}
    before = {"tests": samples("tests", {"checks/test_more.py::test_one": "passed",
                                         "checks/test_more.py::test_two": "passed",
                                         "checks/test_extra.py::test_x": "passed"}),
              "js": samples("js", {"spec/cart.js > cart > adds": "passed"}, parser="vitest")}
    assert graft.rewritten("checks/test_more.py", onto, before) == (
        "rewrites tests: checks/test_more.py is a test file of the branch (2 test(s) that "
        "passed before: checks/test_more.py::test_one, checks/test_more.py::test_two); a "
        "graft never changes or removes the tests that judge it")
    assert graft.rewritten("spec/cart.js", onto, before) == (
        "rewrites tests: spec/cart.js is a test file of the branch (1 test(s) that passed "
        "before: spec/cart.js > cart > adds); a graft never changes or removes the tests "
        "that judge it")
    assert graft.rewritten("checks/helpers.py", onto, before) is None  # verified by id
    assert graft.rewritten("checks/test_new.py", onto, before) is None  # it only adds


# -- flags ---------------------------------------------------------------------------------


def test_the_flag_names_the_arm_and_its_harness_files_bounded() -> None:
    touched = ["vitest.config.mts", "tests/conftest.py"]
    many = [f"node_modules/x/{i}.js" for i in range(FLAG_FILES + 3)]
    arms = [score_arm(arm_of(name), result(name, "success", "PPP"), {}, None, WEIGHTS,
                      harness_touched=files)
            for name, files in (("A", []), ("B", touched), ("C", many))]
    found = [f for f in flags(arms) if f.startswith("harness_touched")]
    assert found == ["harness_touched:B (tests/conftest.py, vitest.config.mts)",
                     "harness_touched:C (" + ", ".join(sorted(many)[:FLAG_FILES])
                     + ", +3 more)"]
    assert describe_flag(found[0]).startswith(
        "harness_touched:B (tests/conftest.py, vitest.config.mts): the arm's diff changed "
        "harness files")


# -- the branch, with real git ---------------------------------------------------------------


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "t@t.invalid")
    git(root, "config", "user.name", "t")
    for name, text in {"app.py": "VALUE = 1\n", "conftest.py": "# base\n",
                       "tests/test_app.py": "def test_app(): 0\n"}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    return root


def commit_on(repo: Path, base: str, files: dict[str, str | None], message: str) -> str:
    git(repo, "checkout", "-q", "--detach", base)
    write_files(repo, files)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)
    sha = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "main")
    return sha


def test_candidates_never_propose_harness_or_bytecode(repo: Path) -> None:
    base = git(repo, "rev-parse", "HEAD")
    winner = commit_on(repo, base, {"app.py": "VALUE = 2\n"}, "fix")
    other = commit_on(repo, base, {
        "conftest.py": "# forged\n", "vitest.config.mts": "export default {}\n",
        "package.json": "{}\n", "go.mod": "module x\n", "Cargo.toml": "[package]\n",
        "pytest.ini": "[pytest]\n", "lib/__pycache__/x.cpython-311.pyc": "\0",
        "docs/notes.md": "why\n", "tests/test_app.py": "def test_app(): 1\n"}, "B")
    offered = merge.offered(repo, base, winner, {"B": other}, {"tests/test_app.py"})
    assert [c.path for c in offered] == sorted([
        "Cargo.toml", "conftest.py", "docs/notes.md", "go.mod",
        "lib/__pycache__/x.cpython-311.pyc", "package.json", "pytest.ini",
        "vitest.config.mts"])
    assert merge.candidates(repo, base, winner, {"B": other}, {"tests/test_app.py"}) == [
        merge.Candidate("B", other, "docs/notes.md")]


def test_a_file_named_star_is_grafted_as_that_file_never_as_a_pattern(repo: Path) -> None:
    """Attack: an arm adds a file literally named `*` beside a forged conftest; a graft
    that handed `*` to git as a pathspec would take every file of the arm's commit."""
    base = git(repo, "rev-parse", "HEAD")
    other = commit_on(repo, base, {"*": "star\n", "conftest.py": "# forged\n",
                                   ":(top)conftest.py": "magic\n"}, "B")
    (star,) = [c for c in merge.candidates(repo, base, base, {"B": other}, set())
               if c.path == "*"]
    grafted = merge.graft(repo, base, star)
    assert grafted is not None
    assert git(repo, "diff", "--name-only", base, grafted) == "*"
    assert git(repo, "show", f"{grafted}:conftest.py") == "# base"
    magic = merge.Candidate("B", other, ":(top)conftest.py")
    again = merge.graft(repo, base, magic)
    assert again is not None and git(repo, "diff", "--name-only", base, again) == (
        ":(top)conftest.py")


def test_any_name_git_allows_is_offered_grafted_and_shown_escaped(repo: Path) -> None:
    base = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "--detach", base)
    (repo / "caf\u00e9.py").write_text("x = 1\n")
    (repo / b"raw\xff.py".decode("utf-8", "surrogateescape")).write_text("y = 1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "names")
    other = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "main")
    found = merge.candidates(repo, base, base, {"B": other}, set())
    assert sorted(c.path.encode("utf-8", "surrogateescape") for c in found) == [
        "caf\u00e9.py".encode(), b"raw\xff.py"]
    for candidate in found:
        assert merge.graft(repo, base, candidate) is not None


def test_a_graft_that_changes_nothing_is_none(repo: Path) -> None:
    base = git(repo, "rev-parse", "HEAD")
    assert merge.graft(repo, base, merge.Candidate("B", base, "app.py")) is None


def test_restore_puts_back_a_file_and_removes_a_directory_the_source_lacks(repo: Path) -> None:
    base = git(repo, "rev-parse", "HEAD")
    other = commit_on(repo, base, {"conftest.py": "# forged\n", "tests/json/__init__.py": "",
                                   "app.py": "VALUE = 2\n"}, "B")
    head = merge.restore(repo, other, base, ["conftest.py", "tests/json"], "keep the base's")
    assert head is not None
    assert git(repo, "diff", "--name-only", base, head) == "app.py"


class Loaded:
    """What `requested` reads of a loaded manifest."""

    def __init__(self, repo: Path) -> None:
        self.repo_path = repo


RULES = merge_mod.Never(frozenset({"tests/test_app.py", "scripts/lint.sh"}))


@pytest.mark.parametrize(("path", "message"), [
    ("vitest.config.mts", "'B:vitest.config.mts': vitest.config.mts is harness by name or "
                          "place (a runner loads it without the tests importing it): a "
                          "merge never grafts it"),
    ("tests/conftest.py", "tests/conftest.py is harness by name"),
    ("tests/test_app.py", "tests/test_app.py is protected"),
    ("scripts/lint.sh", "scripts/lint.sh is protected"),
    ("README.md", "the arm did not change README.md: nothing to graft"),
])
def test_an_asked_graft_of_harness_protected_or_unchanged_path_is_exit_2(
        repo: Path, path: str, message: str) -> None:
    base = git(repo, "rev-parse", "HEAD")
    other = commit_on(repo, base, {"vitest.config.mts": "export default {}\n",
                                   "tests/conftest.py": "# forged\n",
                                   "scripts/lint.sh": "exit 0\n",
                                   "tests/test_app.py": "def test_app(): 1\n"}, "B")
    with pytest.raises(BadInputError, match=message.replace("(", r"\(").replace(")", r"\)")
                       ) as error:
        merge_mod.requested(Loaded(repo), "first", [f"B:{path}"],  # type: ignore[arg-type]
                              {"B": other}, base, RULES)
    assert error.value.exit_code == 2


def test_an_asked_commit_leaves_its_harness_and_protected_files_out(repo: Path) -> None:
    """Issue 30: a script a check's command names (`sh scripts/check.sh`) is graftable
    code when it is not protected (samples measure the arm's); a protected one is not."""
    base = git(repo, "rev-parse", "HEAD")
    other = commit_on(repo, base, {"vitest.config.mts": "export default {}\n",
                                   "tests/test_app.py": "def test_app(): 1\n",
                                   "scripts/check.sh": "exit 0\n",
                                   "scripts/lint.sh": "exit 0\n", "lib.py": "z = 1\n"}, "B")
    found, withheld = merge_mod.requested(
        Loaded(repo), "first", [f"B:{other}"], {"B": other}, base,  # type: ignore[arg-type]
        RULES)
    assert found == [merge.Candidate("B", other, "lib.py"),
                     merge.Candidate("B", other, "scripts/check.sh")]
    assert withheld == [("B", "scripts/lint.sh", merge_mod.PROTECTED),
                        ("B", "tests/test_app.py", merge_mod.PROTECTED),
                        ("B", "vitest.config.mts", graft.BY_NAME)]


# -- a graft decided before its last sample ------------------------------------------------


def test_a_sample_that_lost_a_test_settles_the_graft_and_no_other_can_undo_it() -> None:
    """`lost_already`: one graded sample that lost a held id (or passed fewer tests) is a
    loss whatever the others show; a RIG_ERROR sample and a check with no sample yet say
    nothing; what holds so far is not settled."""
    held = {"t::a": "passed", "t::b": "passed"}
    before = {"tests": samples("tests", held, held), "success": samples("success", held)}
    lost = sample("tests", 1, {"t::a": "passed", "t::b": "failed"})
    fine = sample("tests", 2, held)
    assert graft.lost_already(before, [fine, lost]) is True
    assert graft.lost_already(before, [lost]) is True
    assert graft.lost_already(before, [fine]) is False
    assert graft.lost_already(before, []) is False  # success has no sample yet: not lost
    broken = sample("tests", 3, {}, letter="R")
    assert graft.lost_already(before, [fine, broken]) is False
    fewer = {"tests": [sample("tests", 1, {}, parser="exit-code", passed=3)]}
    assert graft.lost_already(fewer, [sample("tests", 2, {}, parser="exit-code",
                                             passed=3)]) is False
    # What settles it is what the whole judgement then says: dropped.
    assert graft.judge({"tests": 1.0, "success": 1.0}, before, {"tests": [lost]}).kept is False


ONE_CPU = SimpleNamespace(engine=SimpleNamespace(workers=1))  # an executor one at a time


def test_run_all_starts_no_sample_once_the_samples_so_far_settle_it(monkeypatch) -> None:
    """sample_runs.run_all with `settled`: on one core the samples run one by one; once the
    records so far settle it, no sample not yet started runs, and the records returned
    are those that ran, in order."""
    from runner.commands import sample_runs

    ran: list[int] = []

    def fake(executor: object, spec: object, stage: object, base: object) -> SampleRecord:
        ran.append(spec.n)  # type: ignore[attr-defined]
        return record("B", "tests", spec.n, "F" if spec.n == 2 else "P")  # type: ignore[attr-defined]

    monkeypatch.setattr(sample_runs, "run_sample", fake)
    todo = [type("Spec", (), {"n": n, "arm": "B", "check": "tests"})() for n in range(1, 6)]
    said: list[str] = []
    found = sample_runs.run_all(ONE_CPU, todo, Path("/nowhere"), said.append,  # type: ignore[arg-type]
                          diagnose=False,
                          settled=lambda records: any(r.verdict.value == "FAIL" for r in records))
    assert (ran, [r.n for r in found]) == ([1, 2], [1, 2])
    assert len(said) == 2
    everything = sample_runs.run_all(ONE_CPU, todo, Path("/nowhere"), said.append,  # type: ignore[arg-type]
                               diagnose=False)
    assert [r.n for r in everything] == [1, 2, 3, 4, 5]
