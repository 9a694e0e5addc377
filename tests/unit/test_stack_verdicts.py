"""A stack that never gets healthy (rig.sample.verdict rule 6): FAIL server_unhealthy for
the arm whose code broke it, RIG_ERROR infra when it is the base's own stack or the
base's stack fails the same way. No docker."""

from __future__ import annotations

from rig.sample.oracle import assess
from rig.sample.record import StackRecord
from rig.sample.recorded import Base
from rig.sample.spec import Execution, SampleSpec, StackSpec
from rig.sample.verdict import FailReason, RigErrorReason, Verdict

STACK = StackSpec("/m/compose/web.yml", "ab" * 32, 30)
RECORD = StackRecord(file=STACK.file, sha256=STACK.sha256, project="bakeoff-x-1",
                     services={"app": "sha256:1", "redis": "sha256:2"}, health="unhealthy")


def spec(commit: str) -> SampleSpec:
    return SampleSpec(change="c", arm="A", check="success", n=1, commit=commit,
                      base_commit="base", command="pytest -q", parser="pytest",
                      timeout_s=60, stack=STACK)


def unhealthy() -> Execution:
    return Execution(exit_code=None, log="", duration_s=1.0, stack=RECORD,
                     stack_detail="container app is unhealthy")


def test_an_arms_unhealthy_stack_is_fail_server_unhealthy_that_asks_the_base() -> None:
    graded = assess(spec("arm"), unhealthy())
    assert (graded.outcome.verdict, graded.outcome.reason) == (
        Verdict.FAIL, FailReason.server_unhealthy)
    assert graded.outcome.detail == ("the stack never got healthy: container app is "
                                     "unhealthy")
    assert graded.needs_base


def test_the_bases_own_unhealthy_stack_is_rig_error_infra() -> None:
    graded = assess(spec("base"), unhealthy())
    assert (graded.outcome.verdict, graded.outcome.reason) == (
        Verdict.RIG_ERROR, RigErrorReason.infra)
    assert graded.outcome.detail.endswith("it is the base's own stack: the rig's fault")


def test_an_arms_unhealthy_stack_is_rig_error_when_the_bases_is_unhealthy_too() -> None:
    base = Base("c/@base/success/1", Verdict.RIG_ERROR, "infra", None, stack="unhealthy")
    judged = assess(spec("arm"), unhealthy(), base).outcome
    assert (judged.verdict, judged.reason) == (Verdict.RIG_ERROR, RigErrorReason.infra)
    assert "the base's stack fails the same way (c/@base/success/1)" in judged.detail


def test_an_arms_unhealthy_stack_stays_fail_when_the_bases_is_healthy() -> None:
    base = Base("c/@base/success/1", Verdict.FAIL, "tests_failed", None, stack="healthy")
    judged = assess(spec("arm"), unhealthy(), base).outcome
    assert (judged.verdict, judged.reason) == (Verdict.FAIL, FailReason.server_unhealthy)
    assert judged.detail.endswith("with its stack healthy: the arm's code broke it")


def test_a_per_sample_servers_unhealthy_is_fail_without_asking_the_base() -> None:
    """Unchanged for `server = {...}`: its FAIL server_unhealthy never asks the base."""
    graded = assess(spec("arm"), Execution(exit_code=None, log="", duration_s=1.0,
                                           server="unhealthy", server_log="boom"))
    assert graded.outcome.reason is FailReason.server_unhealthy
    assert not graded.needs_base
