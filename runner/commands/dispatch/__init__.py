"""Dispatch: every arm's agent in its own sandbox, in parallel, on an identical brief.

    dispatch(engine, loaded, arms=None, reporter=None) -> DispatchReport

The adapters (how an arm's agent is started) are in `runner.agents`; the live view is
`runner.dispatch.view.DispatchView`; `bakeoff-sandbox dispatch` is `runner.dispatch_cli`.
"""

from runner.commands.dispatch.brief import BRIEF_PATH, GUARDRAILS, Brief, compose_brief
from runner.commands.dispatch.record import (
    DONE_STATES,
    ArmRecord,
    ArmState,
    interrupted_branch,
    load_record,
    record_dir,
)
from runner.commands.dispatch.redact import Redactor, StreamRedactor
from runner.commands.dispatch.run import (
    ArmOutcome,
    DispatchReport,
    DispatchReporter,
    SecretMissingError,
    dispatch,
)

__all__ = [
    "BRIEF_PATH",
    "DONE_STATES",
    "GUARDRAILS",
    "ArmOutcome",
    "ArmRecord",
    "ArmState",
    "Brief",
    "DispatchReport",
    "DispatchReporter",
    "Redactor",
    "SecretMissingError",
    "StreamRedactor",
    "compose_brief",
    "dispatch",
    "interrupted_branch",
    "load_record",
    "record_dir",
]
