"""What one sample gives the verdict rules (`Evidence`), gathered from its spec and what
ran (`evidence`): the parser's reading of the output, the rig's observer for pytest, the
canaries, the tripwire's finding, a browser criterion's real path.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from rig.guards import canary as canary_mod
from rig.guards import observer as observer_mod
from rig.guards import real_path as real_path_mod
from rig.guards import shell
from rig.guards.observer import NOTHING, ObserverReport
from rig.parsers import get_parser
from rig.parsers.base import ParseResult
from rig.sample import metric
from rig.sample.spec import Execution, SampleSpec
from rig.sample.tree import clean

SUCCESS = "success"  # the success criterion's check: its protected tests checked by id


@dataclass(frozen=True)
class Evidence:
    """What one sample gives the rules (`rig.sample.evidence.evidence` builds it)."""

    parser: str
    exit_code: int | None = None
    parsed: ParseResult = field(default_factory=lambda: ParseResult(counts=None))
    log: str = ""
    files: Mapping[str, str] = field(default_factory=dict)
    timed_out: bool = False
    oom_killed: bool = False
    outlived: bool = False  # the host's wait expired: the container outlived its deadline
    program_present: bool = True
    missing_tools: tuple[str, ...] = ()
    image: str = ""
    refused: str | None = None
    infra_error: str | None = None
    layout_failed: bool = False
    server: str = "none"  # none | healthy | unhealthy | no_http_client
    server_log: str = ""
    stack: str = "none"  # none | healthy | unhealthy
    stack_detail: str = ""
    of_base: bool = False  # the sample ran the base's own tree: it is the reference
    ratchet: metric.Ratchet | None = None
    canary: canary_mod.Canary | None = None
    observed: bool = False  # the rig's observer was planted (pytest)
    observation: ObserverReport = NOTHING
    by_id: bool = False  # the success criterion: its protected tests are checked by id
    simple: bool = True  # the command is one simple command (its exit code is the runner's)
    command: str = ""
    # An exit-code check: how its tripwire showed its tool blind on the arm's tree (rule
    # 7b, `rig.guards.tripwire`), and what the rig already knows it could not check.
    blind: str | None = None
    unguarded: tuple[str, ...] = ()
    build: str = ""  # `[toolchain] build`, when the sample ran one
    build_exit: int | None = None
    build_log: str = ""
    # A browser criterion's `expect_requests`, decided on the requests its page made.
    real_path: real_path_mod.Decided = real_path_mod.NOT_ASKED


def evidence(spec: SampleSpec, execution: Execution) -> Evidence:
    """What the verdict rules read of one sample."""
    parsed = get_parser(spec.parser).parse(execution.log) if spec.ratchet is None else \
        get_parser("exit-code").parse("")
    stack = "none" if execution.stack is None else execution.stack.health
    return Evidence(
        parser=spec.parser, exit_code=execution.exit_code, parsed=parsed, log=execution.log,
        files=execution.files, timed_out=execution.timed_out,
        oom_killed=execution.oom_killed, outlived=execution.outlived,
        program_present=execution.program_present, missing_tools=execution.missing_tools,
        image=execution.image or execution.image_id, refused=execution.refused,
        infra_error=execution.infra_error, layout_failed=execution.layout_failed,
        server=execution.server, server_log=execution.server_log, stack=stack,
        stack_detail=execution.stack_detail, of_base=spec.commit == spec.base_commit,
        build=" && ".join(spec.build), build_exit=execution.build_exit,
        build_log=execution.build_log, real_path=_real_path(spec, execution),
        ratchet=spec.ratchet, canary=execution.canary, observed=execution.observed,
        observation=_named(observer_mod.read(execution.observation)),
        by_id=spec.check == SUCCESS,
        simple=shell.simple(spec.command), command=spec.command,
        blind=None if spec.guard is None else spec.guard.blind,
        unguarded=() if spec.guard is None or spec.guard.unguarded is None
        else (spec.guard.unguarded,))


def _named(observed: observer_mod.ObserverReport) -> observer_mod.ObserverReport:
    """The observation with its test ids as a record holds them (`rig.sample.tree.clean`: a
    file name that is not UTF-8 in git's quoted form), so an arm's ids compare with those
    of the base's stored record."""
    if all(clean(t.id) == t.id for t in observed.tests):
        return observed
    return dataclasses.replace(observed, tests=tuple(
        dataclasses.replace(t, id=clean(t.id)) for t in observed.tests))


def _real_path(spec: SampleSpec, execution: Execution) -> real_path_mod.Decided:
    """A browser criterion's `expect_requests` (and its tests' own markers), decided on
    the requests its page made, for the sample and for each passed test's own flow."""
    if spec.browser is None:
        return real_path_mod.NOT_ASKED
    ran, files = execution.browser_run, execution.browser_files
    if not spec.browser.expect_requests and real_path_mod.TESTS_FILE not in files:
        return real_path_mod.NOT_ASKED
    return real_path_mod.decide(spec.browser.expect_requests,
                            files.get(real_path_mod.REQUESTS_FILE, b""),
                            "" if ran is None else ran.base_url,
                            files.get(real_path_mod.TESTS_FILE), Path(spec.browser.file).name)
