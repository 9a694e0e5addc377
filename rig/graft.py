"""A graft's re-verification, judged: a merge never weakens the guardrail (pure).

A graft (one file of another arm's, put on the experiment branch) is kept only when
nothing that held before it holds less after it:

- **the tests that judge it** (`rewritten`): a graft never changes or removes a test
  file the branch has (named as a runner names its test files, or holding a test that
  passed before it): verified by those very tests, it would be its own judge. New test
  files may be grafted;
- a file a check's command names (`sh scripts/check.sh`, `grep -c TODO app.py`) is
  code like any other: a sample measures the arm's (`rig.preflight.command_files`), so a
  graft of it is verified like any other. A grader's own script is `protected`, and a
  protected file is never grafted;
- **harness** (`harness_paths`): a file a sample would pin to the base's (`rig.guards.harness`:
  by name or place for every runner, by the import layout, named by a runner config, a
  Go `TestMain`) is never grafted: samples never obey it, but the branch is the next
  change's base, whose harness every later sample runs under;
- **rates** (`Judgement.worse`): the success criterion's and every check's pass-rate at
  least the winner's (the floor);
- **by id** (`by_id`): every test that passed in every sample before the graft (the
  winner's, or the last kept graft's re-verification) passes in every sample after it.
  One that fails, errors, skips, xfails or is missing from a sample is lost, and the
  graft with it: a check whose pass-rate held can still have run fewer tests. And no
  sample after passes fewer tests than every sample before did (the runner's counts:
  what is left when its output names only the failing tests, as vitest's and jest's
  default reporters do). A check whose parser reports no tests (`exit-code`, a ratchet's
  metric) is judged by its rate alone, and says so (`ById.note`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from rig.guards import harness
from rig.parsers.base import ID_SEPARATORS
from rig.sample import tree as tree_mod
from rig.sample.record import SampleRecord
from rig.sample.tree import Tree
from rig.sample.verdict import Verdict
from rig.stats import pass_rate

PASSING = frozenset({"passed", "xpassed"})
LOST_KEPT = 20   # lost ids a record keeps per check
LOST_SHOWN = 5   # lost ids a message names per check
NO_IDS = "exit-code"


@dataclass(frozen=True)
class Lost:
    """A test that passed in every sample before the graft and not in every one after:
    `after` is how it came out where it did not pass (`absent`: not in that sample)."""

    id: str
    after: tuple[str, ...]

    def text(self) -> str:
        return f"{self.id} ({', '.join(self.after)})"


@dataclass(frozen=True)
class ById:
    """One check after a graft: how many ids held before, which were lost (at most
    `LOST_KEPT`, `lost_count` in all), the fewest tests that passed in a sample before and
    after (`passed`, when the parser counts them), and why no id was compared, if none."""

    check: str
    compared: int
    lost: tuple[Lost, ...] = ()
    lost_count: int = 0
    note: str = ""
    passed: tuple[int, int] | None = None  # (fewest passed before, fewest passed after)

    @property
    def fewer(self) -> bool:
        """Fewer tests passed in a sample after than in every sample before."""
        return self.passed is not None and self.passed[1] < self.passed[0]

    @property
    def regressed(self) -> bool:
        return bool(self.lost_count) or self.fewer

    def text(self) -> str:
        """What was lost, bounded: `lost by id: tests: 2 of 3 ...: a (skipped), ...`."""
        parts = []
        if self.lost_count:
            shown = ", ".join(lost.text() for lost in self.lost[:LOST_SHOWN])
            more = self.lost_count - min(len(self.lost), LOST_SHOWN)
            parts.append(f"lost by id: {self.check}: {self.lost_count} of {self.compared} "
                         f"test(s) that passed before did not pass after: {shown}"
                         + (f" (+{more} more)" if more else ""))
        if self.fewer and self.passed is not None:
            parts.append(f"lost by count: {self.check}: {self.passed[0]} test(s) passed in "
                         f"every sample before, {self.passed[1]} in a sample after")
        return "; ".join(parts)

    def held(self) -> str:
        """What held, for a kept graft: `tests 3 held`, or the note."""
        if self.note:
            return f"{self.check} {self.note}"
        return f"{self.check} {self.compared} held"


def passed_throughout(records: Sequence[SampleRecord]) -> dict[str, bool]:
    """The ids that passed (or xpassed) in every sample -> True when every one of them
    was a plain pass (then only a pass is a pass after)."""
    if not records:
        return {}
    held: dict[str, bool] | None = None
    for record in records:
        mine = {str(t["id"]): str(t["status"]) for t in record.tests}
        here = {i: s == "passed" for i, s in mine.items() if s in PASSING}
        held = here if held is None else {i: plain and here[i] for i, plain in held.items()
                                          if i in here}
    return held or {}


def fewest_passed(before: Sequence[SampleRecord],
                  after: Sequence[SampleRecord]) -> tuple[int, int] | None:
    """The fewest tests that passed in a sample before and after (a sample after with
    no counts passed none); None when a sample before has no counts."""
    if not before or any(r.counts is None for r in before):
        return None
    return (min(r.counts.passed for r in before if r.counts is not None),
            min((0 if r.counts is None else r.counts.passed for r in after), default=0))


def by_id(check: str, before: Sequence[SampleRecord], after: Sequence[SampleRecord]) -> ById:
    """Every id that passed in every sample of `before` must pass in every one of
    `after` (a plain pass before stays a plain pass, not an xpass: a test newly marked
    xfail no longer guards anything), and no sample after may pass fewer tests than
    every sample before did (what a runner that names only its failing tests allows)."""
    if any(r.parser == NO_IDS for r in (*before, *after)):
        return ById(check, 0, note="rates only: the exit-code parser reports no test ids")
    if any(r.metric_base is not None for r in before):
        return ById(check, 0, note="rates only: a ratchet is judged by its metric")
    held = passed_throughout(before)
    passed = fewest_passed(before, after)
    if not held:
        note = ("by count only: the runner's output named no test that passed in every "
                "sample before" if passed is not None else
                "rates only: no test passed in every sample before the graft, so no id is "
                "held to")
        return ById(check, 0, note=note, passed=passed)
    seen = [{str(t["id"]): str(t["status"]) for t in record.tests} for record in after]
    lost = [Lost(test, tuple(sorted({s.get(test, "absent") for s in seen or [{}]
                                     if not _passes(s.get(test), plain)})))
            for test, plain in sorted(held.items())]
    lost = [item for item in lost if item.after]
    return ById(check, len(held), tuple(lost[:LOST_KEPT]), len(lost), passed=passed)


def _passes(status: str | None, plain: bool) -> bool:
    return status == "passed" or (not plain and status == "xpassed")


@dataclass(frozen=True)
class Judgement:
    """A graft's re-verification against the floor (rates) and the state before it (ids)."""

    rates: Mapping[str, float]
    floor: Mapping[str, float]
    ids: Mapping[str, ById]
    rig_errors: tuple[str, ...] = ()  # `sample (reason)` of every RIG_ERROR sample after

    @property
    def worse(self) -> list[str]:
        """Each check whose pass-rate fell below the floor, `name floor -> rate`."""
        return [f"{name} {self.floor[name]:.2f} -> {rate:.2f}"
                for name, rate in self.rates.items() if rate < self.floor.get(name, 0)]

    @property
    def lost(self) -> list[ById]:
        """Each check that lost a test (by id or by count)."""
        return [found for found in self.ids.values() if found.regressed]

    @property
    def kept(self) -> bool:
        """Nothing regressed, and every sample was graded: a RIG_ERROR sample verified
        nothing, and the branch moves only to a verified result."""
        return not self.worse and not self.lost and not self.rig_errors

    def why(self) -> str:
        """What decided: the regressions, or every rate and what was compared by id."""
        if not self.kept:
            errors = (f"not verified: RIG_ERROR in {', '.join(self.rig_errors[:LOST_SHOWN])}"
                      " (a rig fault, not the graft's: fix the rig and merge again)")
            parts = ([errors] if self.rig_errors else []) + (
                [f"regressed: {'; '.join(self.worse)}"] if self.worse else []) + [
                found.text() for found in self.lost]
            return "; ".join(parts)
        rates = ", ".join(f"{name} {rate:.2f}" for name, rate in self.rates.items())
        ids = ", ".join(found.held() for found in self.ids.values())
        return f"re-verified: {rates}; by id: {ids}"


def judge(floor: Mapping[str, float], before: Mapping[str, Sequence[SampleRecord]],
          after: Mapping[str, Sequence[SampleRecord]]) -> Judgement:
    """The graft's re-verification (`after`, per check) against the winner's rates
    (`floor`) and the samples of the state it was grafted onto (`before`)."""
    rates = {check: pass_rate(r.verdict for r in records).rate
             for check, records in after.items()}
    graded = {check: [r for r in records if r.verdict is not Verdict.RIG_ERROR]
              for check, records in after.items()}
    ids = {check: by_id(check, before.get(check, ()), records) if records else
           ById(check, 0, note="nothing compared: no sample after was graded")
           for check, records in graded.items()}
    errors = tuple(f"{r.sample} ({r.rig_error or r.reason or 'unknown'})"
                   for records in after.values() for r in records
                   if r.verdict is Verdict.RIG_ERROR)
    return Judgement(rates, floor, ids, errors)


def lost_already(before: Mapping[str, Sequence[SampleRecord]],
                 records: Sequence[SampleRecord]) -> bool:
    """Whether a graft's samples so far already lost a test (by id or by count, in a
    graded sample): more samples cannot undo it (a loss in any sample is a loss; the
    fewest passed can only fall), so the graft is dropped whatever they show."""
    after: dict[str, list[SampleRecord]] = {}
    for record in records:
        if record.verdict is not Verdict.RIG_ERROR:
            after.setdefault(record.check, []).append(record)
    return any(by_id(check, before.get(check, ()), found).regressed
               for check, found in after.items())


# -- harness -----------------------------------------------------------------------------

BY_NAME = "harness by name or place (a runner loads it without the tests importing it)"
IN_CONTEXT = ("harness in the tree it would join (a package marker of a test directory, a "
              "module shadowing another, a file a runner configuration names, a Go TestMain)")


def harness_paths(grafted: Tree, onto: Tree, importable: Iterable[str] = ()) -> dict[str, str]:
    """The paths where `grafted` differs from `onto` that are harness, each with why:
    by name or place, or because a sample of `grafted` run under `onto`'s harness would
    pin them (`rig.guards.harness.pin`; a directory when a whole package would go). Paths as
    git holds them (`rig.sample.tree.shown` prints them)."""
    changed = sorted(p for p in {*grafted, *onto} if grafted.get(p) != onto.get(p))
    own = harness.own_conftests(grafted, onto)  # the arm's own, obeyed in its samples
    found = {p: BY_NAME for p in harness.touched(changed) if p not in own}
    pinned = harness.pin(dict(grafted), onto, importable)
    for path in (*pinned.restored, *pinned.removed):
        found.setdefault(path, IN_CONTEXT)
    return dict(sorted(found.items()))


# -- the tests that judge a graft ---------------------------------------------------------



def rewritten(path: str, onto: Tree, before: Mapping[str, Sequence[SampleRecord]]
              ) -> str | None:
    """Why grafting `path` would change a test the branch has (None: it would not): the
    branch holds `path` and it is a test file by name, or tests that passed before were
    collected from it (by id: `path::name`, `path > name`)."""
    if path not in onto and not any(p.startswith(path + "/") for p in onto):
        return None  # a new file: it adds, it rewrites nothing
    prefixes = tuple(path + separator for separator in ID_SEPARATORS)
    ids = sorted({test for records in before.values()
                  for test in passed_throughout(records) if test.startswith(prefixes)})
    if not ids and not harness.is_test_file(path):
        return None
    shown = ", ".join(ids[:LOST_SHOWN]) + (f" (+{len(ids) - LOST_SHOWN} more)"
                                            if len(ids) > LOST_SHOWN else "")
    held = f" ({len(ids)} test(s) that passed before: {shown})" if ids else ""
    return (f"rewrites tests: {tree_mod.shown(path)} is a test file of the branch{held}; a "
            "graft never changes or removes the tests that judge it")
