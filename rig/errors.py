"""The root exception of `rig` and its subclasses.

The CLI prints ``str(error)`` and exits with ``error.exit_code``: 3 when the measurement
is invalid (a rig error the user must fix), 4 when the frozen contract does not match.
"""

from __future__ import annotations


class RigError(Exception):
    """Root of every error raised by `rig`. Exit code 3: the measurement is invalid."""

    exit_code = 3

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(message if hint is None else f"{message}\n  fix: {hint}")


class ContractMismatchError(RigError):
    """The manifest or a brief changed after the contract was frozen. Exit code 4."""

    exit_code = 4

    def __init__(self, lock: str, changed: list[str]) -> None:
        self.lock = lock
        self.changed = changed
        super().__init__(
            f"the frozen contract {lock} does not match: changed "
            + ", ".join(changed),
            hint="restore the frozen values, or run `bakeoff-sandbox up --refreeze` to record "
                 "a new contract version (results after it count as a new contract)")


class SampleInterruptedError(RigError):
    """A sample an outage cut (the engine, or one of the experiment's services, failed
    under it): not a result. Its attempt is kept for the log (`kept`), no record is
    written in its place, and the next `score`/`run` runs it again. Exit code 3."""

    def __init__(self, sample: str, why: str, kept: str) -> None:
        self.sample, self.why, self.kept = sample, why, kept
        super().__init__(f"sample {sample} was cut by an outage: {why}",
                         hint="once the engine answers, run the same command again: the "
                              "sample runs again (its cut attempt is kept in " + kept + ")")
