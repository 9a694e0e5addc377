"""The root exception of `runner` and its subclasses.

Every error a user can see says what was wrong, where, and what to do; the CLI prints
``str(error)`` and exits with ``error.exit_code`` (docs/design.md, "The command line").
"""

from __future__ import annotations

from pathlib import Path


class RunnerError(Exception):
    """Root of every error raised by `runner`. Exit code 1: an unexpected internal error."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(message if hint is None else f"{message}\n  fix: {hint}")


class BadInputError(RunnerError):
    """Bad input: manifest, arguments, a dirty tree. Exit code 2."""

    exit_code = 2


class ManifestError(BadInputError):
    """A manifest value is wrong. Names the file, the key path, what was found and the fix."""

    def __init__(
        self, file: str, key_path: str, problem: str, *, found: object = None, fix: str
    ) -> None:
        self.file = file
        self.key_path = key_path
        self.found = found
        where = f"{file}: {key_path}" if key_path else file
        found_text = "" if found is None else f" (found {found!r})"
        super().__init__(f"{where}: {problem}{found_text}", hint=fix)


class DirtyTreeError(BadInputError):
    """The target repository has uncommitted or untracked files."""


class ExperimentBusyError(BadInputError):
    """Another `up` of the same experiment holds the lock."""


class UnknownArmError(BadInputError):
    """A command named an arm the manifest does not have."""


class NotUpError(BadInputError):
    """A command needs sandboxes that `up` has not made (or `down` removed)."""


class InfraError(RunnerError):
    """The engine, an image or the database is not usable. Exit code 3."""

    exit_code = 3


class EngineError(InfraError):
    """The container engine did not do what was asked (exit 3). The root of every engine
    failure: the wing (`runner.containers.engine`) maps the client's exceptions to these,
    so a command catches this, never a client library's exception."""


class SandboxUnavailableError(EngineError):
    """The engine broke or the container vanished: the sandbox itself is gone.

    A command that ran and failed is a value (`ExecResult`); this is an exception.
    """


class EngineFailedError(SandboxUnavailableError):
    """The engine broke under a call (a server error, a connection cut or refused): an
    outage, never a refusal. A sample it cuts is run again (`rig.sample.oracle.run_sample`)."""


class EngineUnreachableError(SandboxUnavailableError):
    """No engine answers at the address this machine uses (DOCKER_HOST, else the socket)."""


class EngineRefusedError(EngineError):
    """The engine answered a request with a refusal (a 4xx): names the engine, the request
    and the engine's own words."""

    def __init__(self, engine: str, what: str, answer: str, *, status: int | None,
                 hint: str | None = None) -> None:
        self.engine, self.what, self.answer, self.status = engine, what, answer, status
        code = "" if status is None else f" ({status})"
        super().__init__(f"the engine at {engine} refused to {what}{code}: {answer}",
                         hint=hint)


class NotFoundError(EngineRefusedError):
    """What a request named is not there (404): a container, network, volume, image or
    exec that is gone or never was."""


class ConflictError(EngineRefusedError):
    """The request conflicts with the resource's state (409): a name in use, a container
    not running, paused, or already being removed."""


class OutageError(InfraError):
    """Samples an outage cut (`rig.errors.SampleInterruptedError`): no result is recorded
    for them, and no sample started after the first; the same command run again, once the
    engine and the experiment's services answer, runs them again. Exit code 3."""

    SHOWN = 5

    def __init__(self, samples: list[str], why: str) -> None:
        self.samples, self.why = samples, why
        named = ", ".join(samples[:self.SHOWN])
        more = len(samples) - self.SHOWN
        super().__init__(
            f"an outage cut {len(samples)} sample(s), and no result was recorded for them "
            f"({named}{f', +{more} more' if more > 0 else ''}): {why}",
            hint=(DISK_FREED if NO_SPACE in why else "once `docker info` answers again, ")
            + "run the same command again (`bakeoff-sandbox run` resumes where it stopped): "
              "those samples run again; their cut attempts are kept under "
              "samples/<arm>/<check>/retried/")


class RigErrorRoundError(InfraError):
    """A change whose scoring ended with rig errors: its round is not valid, so `run`
    stops before its merge (the next change never starts on a base the rig left
    unmerged). Names the samples and the fix. Exit code 3."""

    SHOWN = 8

    def __init__(self, change: str, errors: list[str], manifest: str) -> None:
        self.change, self.errors = change, errors
        named = ", ".join(errors[:self.SHOWN])
        more = len(errors) - self.SHOWN
        super().__init__(
            f"{change}: {len(errors)} sample(s) ended in a rig error ({named}"
            f"{f', +{more} more' if more > 0 else ''}): the round is not valid, so `run` "
            "stops here, before its merge and the next change",
            hint=f"read those samples' records (their detail says what failed) and fix the "
                 f"rig; then `bakeoff-sandbox score -f {manifest} --change {change} "
                 f"--redo-rig-errors` and `bakeoff-sandbox run -f {manifest}` again. Or go on "
                 f"past them: `bakeoff-sandbox run --continue-on-rig-error` (every report "
                 f"flags it)")


class ImageMissingError(InfraError):
    """An image is not present locally. We never pull: the message says how to build it."""

    def __init__(self, image: str, build_command: str) -> None:
        self.image = image
        self.build_command = build_command
        super().__init__(
            f"image {image} is not present locally (nothing is ever pulled)",
            hint=f"build it with: {build_command}",
        )


class DatabaseError(InfraError):
    """The experiment's Postgres could not be started or administered."""




class StackRefusedError(BadInputError):
    """A compose file of `compose/` asks for what no stack under test may have (a pull, a
    published port, the host's namespaces or files, a capability): each refusal names
    the file, the service and the key."""

    def __init__(self, file: str, refusals: list[str]) -> None:
        self.file = file
        self.refusals = tuple(refusals)
        super().__init__(f"{file}: refused: " + "; ".join(refusals),
                         hint="a stack runs local images on the sample's internal network "
                              "only: see docs/stacks.md")


class ComposeError(InfraError):
    """The compose binary is missing or a compose command failed outside a stack's own
    health (the rig's problem: exit 3)."""


class ArmStackError(InfraError):
    """An arm's own stack (`[toolchain] stack`) never got healthy at `up`: the base's code
    or the rig's file, never an arm's doing (exit 3); the services are named."""

    def __init__(self, arm: str, file: str, services: list[str], said: str,
                 log: Path) -> None:
        self.arm, self.file, self.services, self.log = arm, file, tuple(services), log
        named = "; ".join(services) or "no service of it reported"
        super().__init__(f"arm {arm}: its stack {file} never got healthy at `up`: {named}"
                         + (f" (compose: {said})" if said else ""),
                         hint=f"it runs the base's code: fix {file} or the base, then `up` "
                              f"again (its services' log: {log})")


class LeftoverError(InfraError):
    """Resources of ours are still there after a sweep (`down`, `gc`): each is named with
    what the engine answered when it was removed."""

    def __init__(self, left: list[str], refused: dict[str, str]) -> None:
        self.left = tuple(left)
        self.refused = dict(refused)
        named = "; ".join(f"{what} ({refused.get(what, 'still there')})" for what in left)
        super().__init__(f"{len(left)} of our resources are still there after removal: {named}",
                         hint="run the command again; `docker inspect NAME` shows what holds it")


# -- the engine's own failures, named (issue 31): each says which engine and what to do --

RESUME = "run the same command again: the run resumes where it stopped"


NO_SPACE = "has no space left on its disk"  # how EngineDiskFullError says it
DISK_FREED = ("free space on that engine's data root (`docker system df` there shows what "
              "holds it; or give it a larger disk), then ")


class EngineDiskFullError(EngineFailedError):
    """The engine's own disk (its data root: images, layers, containers) is full: the
    engine answered "no space left on device" to a request. Never a sample's own tmpfs
    filling up (that is the sample's output, graded as the arm's). An outage: a sample it
    cuts runs again; exit 3."""

    def __init__(self, engine: str, what: str, answer: str) -> None:
        self.engine, self.what, self.answer = engine, what, answer
        super().__init__(f"the engine at {engine} {NO_SPACE}, so it could not {what}: "
                         f"{answer}", hint=DISK_FREED + RESUME)


class EngineNetworksExhaustedError(EngineFailedError):
    """The engine has no address pool left for another network ("could not find an
    available, non-overlapping IPv4 address pool"): its networks, ours and others', use
    every pool it has (about 31 by default). The engine's capacity, never an arm's doing
    (no arm reaches the engine): an outage, a sample it cuts runs again; exit 3."""

    def __init__(self, engine: str, what: str, answer: str) -> None:
        self.engine, self.what, self.answer = engine, what, answer
        super().__init__(f"the engine at {engine} has no address pool left for another "
                         f"network, so it could not {what}: {answer}",
                         hint="remove networks nothing uses (`bakeoff-sandbox gc` for ours, "
                              "`docker network ls` for the rest), or give the engine more "
                              "pools (`default-address-pools` in its daemon.json), then "
                              + RESUME)


class EngineNotAnsweringError(EngineUnreachableError):
    """No engine answers at the address (connection refused, no route, timed out, its
    socket missing): stopped, or the network to it is down; exit 3."""

    def __init__(self, engine: str, what: str, why: str) -> None:
        self.engine, self.what, self.why = engine, what, why
        super().__init__(f"no Docker engine answers at {engine} ({why}), so it could not "
                         f"{what}",
                         hint="start that engine, or restore the network to it, until "
                              "`docker info` answers there, then " + RESUME)


class EngineRestartedError(EngineFailedError):
    """The engine stopped or restarted under a call: the connection was cut in the middle
    of its answer, or the engine said it was shutting down. What it ran for us then was
    stopped (not removed). An outage: a sample it cuts runs again; exit 3."""

    def __init__(self, engine: str, what: str, why: str) -> None:
        self.engine, self.what, self.why = engine, what, why
        super().__init__(f"the engine at {engine} stopped or restarted while it was asked to "
                         f"{what} ({why})",
                         hint="once `docker info` answers there again, " + RESUME)
