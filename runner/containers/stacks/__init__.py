"""Stacks under test: a compose file of `compose/`, one fresh compose project per sample.

The real Docker Compose v2 binary (the pinned version, from the per-user cache where
`runner.install.compose` puts it, fetched and checked by version on first need) runs
every compose command through `compose`, the one choke point: an absolute path, a
timeout, an environment of the engine's address only (no `COMPOSE_*` of the user's, no
`.env`, an empty `DOCKER_CONFIG`: the same engine docker-py talks to, and a file's
`${VAR}` means the same everywhere). `load` normalises a file with
`config --format json`; `check` refuses what a stack may not have
(`runner.containers.stacks.file`) and resolves each service's image, locally only.

Per sample (`Stacks.start` / `Stacks.stop`): the user's bytes, checked against the hash
the contract froze, rendered with the rig's policy into the sample's own inputs
directory (never the user's file), `up -d --wait --wait-timeout` on the sample's
internal network; after the sample the services' logs (capped), then
`down -v --remove-orphans`. Every container and volume of a stack carries our labels,
and its network is ours: `down` and `gc` find whatever a killed sample left.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rig.sample.record import StackRecord
from rig.sample.spec import SampleSpec, StackSpec
from runner.containers import images
from runner.containers.backend import ContainerEngine, Labels
from runner.containers.database import DB_ALIAS
from runner.containers.gateway import ALIAS as GATEWAY_ALIAS
from runner.containers.images import BuiltImage, catalog
from runner.containers.images.identity import layers_digest
from runner.containers.sandbox import SandboxLimits
from runner.containers.stacks import file as stack_file
from runner.errors import ComposeError, StackRefusedError
from runner.install import compose as compose_install

PASSED_ENV = ("DOCKER_HOST", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "PATH")
CONFIG_TIMEOUT_S = 60
DOWN_TIMEOUT_S = 120
STOP_GRACE_S = 5
LOG_CAP = 256 * 1024  # bytes of the services' log kept: its head and tail
ARM_RESERVED = (DB_ALIAS, GATEWAY_ALIAS)  # the names the rig puts on an arm's network
SAMPLE_RESERVED = (DB_ALIAS,)  # on a sample's own network: the database, with [database]


def binary() -> Path:
    """Docker Compose of the pinned version, from the per-user cache; installed there on
    first need. A failure is `ComposeError`, whose fix is `bakeoff-sandbox doctor --fix`."""
    return compose_install.binary()


def compose(args: Sequence[str], *, timeout_s: float,
            cwd: Path) -> subprocess.CompletedProcess[str]:
    """One compose command; its exit status is the caller's to read. A binary missing or
    a command that outlives `timeout_s` is `ComposeError`."""
    config = cwd / ".docker-config"
    config.mkdir(mode=0o700, exist_ok=True)
    env = {key: os.environ[key] for key in PASSED_ENV if key in os.environ}
    env["DOCKER_CONFIG"] = str(config)
    argv = [str(binary()), *args]
    try:
        return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as error:
        raise ComposeError(f"`docker-compose {' '.join(args)}` did not end within "
                           f"{timeout_s:.0f} s", hint="check that `docker info` answers") \
            from error


def load(content: bytes, file: str, workdir: Path) -> dict[str, Any]:
    """The normalised model of a compose file's bytes (`config --format json`), read from
    a copy in `workdir` (its project directory: no `.env` or relative path of the user's
    directory counts). A file compose rejects is `StackRefusedError`."""
    source = workdir / "stack.source.yml"
    source.write_bytes(content)
    ran = compose(["-f", source.name, "-p", "bakeoff-check", "config", "--format", "json"],
                  timeout_s=CONFIG_TIMEOUT_S, cwd=workdir)
    if ran.returncode != 0:
        raise StackRefusedError(file, [f"docker-compose config: {ran.stderr.strip()}"])
    model: dict[str, Any] = json.loads(ran.stdout)
    return model


def check(engine: ContainerEngine, content: bytes, file: str, workdir: Path | None = None, *,
          reserved: Sequence[str] | None = None) -> dict[str, BuiltImage]:
    """What `up` asks of a stack: its model refused or accepted, and each service's local
    image (one of images/ is built on first use; any other must be local: nothing is
    pulled); service -> image. `reserved`: an arm's own stack, with the names the rig
    puts on the arm's network (`stack_file.arm_refusals`)."""
    with tempfile.TemporaryDirectory(prefix="bakeoff-stack-") as scratch:
        model = load(content, file, workdir or Path(scratch))
    problems = (stack_file.refusals(model, reserved=SAMPLE_RESERVED) if reserved is None
                else stack_file.arm_refusals(model, reserved))
    resolved: dict[str, BuiltImage] = {}
    for service, ref in stack_file.images(model).items():
        built = _local_image(engine, ref)
        if built is None:
            problems.append(f"service {service!r}: image {ref!r} is not local and would be "
                            "pulled (nothing is ever pulled: build it, or name an image of "
                            "images/)")
        else:
            resolved[service] = built
    if problems:
        raise StackRefusedError(file, problems)
    return resolved


def _local_image(engine: ContainerEngine, ref: str) -> BuiltImage | None:
    if catalog.project_name(ref) is not None:
        return images.resolve(engine, ref)
    attrs = images.inspect(engine, ref)
    if attrs is None:
        return None
    return BuiltImage(ref, ref, str(attrs["Id"]), layers_digest(attrs), cached=True)


def pinned_images(engine: ContainerEngine, stack: StackSpec, model: Mapping[str, Any]
                  ) -> dict[str, str]:
    """The recorded image ID of each service; a service set that differs from the file's,
    or an image that no longer exists, is `ComposeError` (never pulled, never rebuilt)."""
    pinned = dict(stack.images)
    if set(pinned) != set(stack_file.services(model)):
        raise ComposeError(f"{stack.file}: services {sorted(stack_file.services(model))} are "
                           f"not the recorded {sorted(pinned)}",
                           hint="reproduce runs the stack the sample ran, or nothing")
    gone = sorted(f"{name} ({image[:19]})" for name, image in pinned.items()
                  if images.inspect(engine, image) is None)
    if gone:
        raise ComposeError(f"{stack.file}: the recorded image of {', '.join(gone)} no longer "
                           "exists and is never pulled",
                           hint="rebuild it (bakeoff-sandbox images build) and reproduce a "
                                "record of the rebuilt image instead")
    return pinned


def sha256(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def read_frozen(stack: StackSpec) -> bytes:
    """The compose file's bytes, as the contract froze them; changed since: `ComposeError`
    (a score verifies the contract first: this is the file changing under a run)."""
    try:
        content = Path(stack.file).read_bytes()
    except OSError as error:
        raise ComposeError(f"cannot read the stack {stack.file}: {error.strerror or error}",
                           hint="restore the file the contract froze") from None
    if sha256(content) != stack.sha256:
        raise ComposeError(f"the stack {stack.file} changed since the contract froze it "
                           f"(sha256 {sha256(content)[:12]}, frozen {stack.sha256[:12]})",
                           hint="restore it, or `up --refreeze` to grade under the new one")
    return content


def project_name(experiment: str, run: str, sample: str) -> str:
    """A compose project name of one sample: ours, findable, unique (a retry or a
    reproduction of the same sample gets another)."""
    return valid_project(f"bakeoff-{experiment}-{run}-{sample}-{secrets.token_hex(2)}")


def valid_project(raw: str) -> str:
    """`raw` as compose accepts a project name: lowercase letters, digits, `_` and `-`."""
    return re.sub(r"-{2,}", "-", re.sub(r"[^a-z0-9_-]", "-", raw.lower())).strip("-_")


@dataclass
class StackRun:
    """One sample's stack: its project, what it ran and how it came up."""

    file: str
    sha256: str
    project: str
    workdir: Path
    services: dict[str, str]  # service -> image ID
    timeout_s: float
    healthy: bool = False
    detail: str = ""  # why it never got healthy
    log: str = ""  # the services' log, once stopped (head and tail)

    def as_record(self) -> StackRecord:
        return StackRecord(file=self.file, sha256=self.sha256, project=self.project,
                           services=dict(self.services),
                           health="healthy" if self.healthy else "unhealthy",
                           timeout_s=self.timeout_s)


class Stacks:
    """One executor's stacks: one project per sample, on the sample's network."""

    def __init__(self, engine: ContainerEngine, experiment: str, run: str) -> None:
        self.engine, self.experiment, self.run = engine, experiment, run

    def start(self, spec: SampleSpec, stack: StackSpec, inputs: str, scratch: Path,
              network: str, limits: SandboxLimits) -> StackRun:
        """The sample's project up, its health awaited (bounded); a stack that never gets
        healthy is a value (`healthy` False, the reason in `detail`), not an error.
        `inputs`: the volume of the sample's inputs (`runner.containers.samples.inputs.volume`,
        the entry script in it); `scratch`: a directory of this machine for the project's
        files."""
        run = self._render(spec, stack, inputs, scratch, network, limits)
        try:
            health, stderr = bring_up(run)
            if health == "failed":
                raise ComposeError(f"the stack {run.project} could not be started: "
                                   f"{tail(stderr)}", hint=f"check {stack.file} and "
                                   "that `docker info` answers")
        except BaseException:
            with contextlib.suppress(ComposeError):
                stop(run)
            raise
        run.healthy = health == "healthy"
        run.detail = "" if run.healthy else tail(stderr)
        return run

    def _render(self, spec: SampleSpec, stack: StackSpec, inputs: str, scratch: Path,
                network: str, limits: SandboxLimits) -> StackRun:
        """The frozen file's model, checked, rendered with the rig's policy into a scratch
        directory of the project's own (no container sees it)."""
        rules = stack_file.Policy(
            labels=Labels(self.experiment, "stack", spec.arm, self.run).as_dict(),
            network=network, cpus=limits.cpus, memory_mb=limits.memory_mb,
            pids=limits.pids, disk_mb=limits.disk_mb, inputs=inputs)
        workdir = Path(tempfile.mkdtemp(prefix="stack-", dir=scratch))
        project = project_name(self.experiment, self.run, spec.sample)
        return render_run(self.engine, stack, workdir, project, rules,
                          lambda model: stack_file.refusals(model, reserved=SAMPLE_RESERVED))

    def stop(self, run: StackRun) -> None:
        stop(run)


RENDERED = "stack.json"  # the file a project runs out of, in its scratch directory


def render_run(engine: ContainerEngine, stack: StackSpec, workdir: Path, project: str,
               policy: stack_file.Policy,
               refusals: Callable[[Mapping[str, Any]], list[str]]) -> StackRun:
    """The frozen file's model, refused (`refusals`) or rendered with `policy` into
    `workdir`, the project's own scratch directory (removed if anything fails)."""
    try:
        model = load(read_frozen(stack), stack.file, workdir)
        problems = refusals(model)
        if problems:
            raise StackRefusedError(stack.file, problems)
        ids = image_ids(engine, stack, model)
        (workdir / RENDERED).write_text(json.dumps(
            stack_file.render(model, project, ids, policy), indent=1))
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    return StackRun(stack.file, stack.sha256, project, workdir, ids, stack.timeout_s)


def image_ids(engine: ContainerEngine, stack: StackSpec,
              model: Mapping[str, Any]) -> dict[str, str]:
    """service -> the ID of its local image (`up` checked they are all local), or the
    IDs `stack.images` pins (a reproduction: the exact images, or an error)."""
    if stack.images:
        return pinned_images(engine, stack, model)
    built = {service: _local_image(engine, ref)
             for service, ref in stack_file.images(model).items()}
    missing = sorted(name for name, image in built.items() if image is None)
    if missing:
        raise ComposeError(f"{stack.file}: the images of {missing} are not local",
                           hint="run `bakeoff-sandbox up` again: it checks the stack")
    return {name: image.image_id for name, image in built.items() if image is not None}


def bring_up(run: StackRun) -> tuple[str, str]:
    """`up -d --wait` of a rendered project, bounded: (healthy | unhealthy | failed,
    compose's stderr)."""
    ran = compose(_args(run, "up", "-d", "--wait", "--wait-timeout",
                        str(max(1, int(run.timeout_s))), "--no-build"),
                  timeout_s=run.timeout_s + DOWN_TIMEOUT_S, cwd=run.workdir)
    return health_of(ran.returncode, ran.stderr), ran.stderr


def stop(run: StackRun) -> None:
    """The services' log kept in `run.log` (capped), then the project down with its
    volumes and its scratch directory removed."""
    try:
        logs = compose(_args(run, "logs", "--no-color"), timeout_s=DOWN_TIMEOUT_S,
                       cwd=run.workdir)
        run.log = cap(logs.stdout + logs.stderr)
    finally:
        down(run)


def down(run: StackRun) -> None:
    """The project down with its volumes, its scratch directory removed."""
    done = compose(_args(run, "down", "-v", "--remove-orphans", "-t", str(STOP_GRACE_S)),
                   timeout_s=DOWN_TIMEOUT_S, cwd=run.workdir)
    shutil.rmtree(run.workdir, ignore_errors=True)
    if done.returncode != 0:
        raise ComposeError(f"the stack {run.project} did not come down: "
                           f"{tail(done.stderr)}",
                           hint="run `bakeoff-sandbox down` (it removes by label)")


def _args(run: StackRun, *command: str) -> list[str]:
    """A project by its rendered file; one a later process stops (an arm's, at `down`)
    has none, and compose finds the project by its own labels."""
    rendered = ["-f", RENDERED] if (run.workdir / RENDERED).is_file() else []
    return [*rendered, "-p", run.project, *command]


PROGRESS = re.compile(r"^\s*(Container|Network|Volume) \S+\s+(Creating|Created|Starting|"
                      r"Started|Waiting|Healthy|Recreate|Recreated|Running|Stopping|"
                      r"Stopped|Removing|Removed)\s*$")


# What `up --wait` prints (v2.40.3) when a service never got healthy: unhealthy, exited,
# or the wait timed out. Anything else (the engine refused a create, a runtime error) is
# the rig failing, not the stack's health.
UNHEALTHY = re.compile(r"is unhealthy|exited \(-?\d+\)|not healthy after")


def health_of(returncode: int, stderr: str) -> str:
    """healthy | unhealthy | failed, from `up --wait`'s exit status and stderr."""
    if returncode == 0:
        return "healthy"
    return "unhealthy" if UNHEALTHY.search(stderr) else "failed"


def tail(text: str, lines: int = 5) -> str:
    """The last lines of compose's stderr that say something (its progress lines don't)."""
    said = [line.strip() for line in text.strip().splitlines() if line.strip()]
    meaningful = [line for line in said if not PROGRESS.match(line)] or said
    return " | ".join(meaningful[-lines:])


def cap(text: str, limit: int = LOG_CAP) -> str:
    """Head and tail of a log longer than `limit` characters, the cut said."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return (f"{text[:half]}\n[bakeoff-rig: {len(text) - 2 * half} characters of the "
            f"services' log left out]\n{text[-half:]}")
