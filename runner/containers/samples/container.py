"""One sample's containers, run, and what they came to (`ContainerResult`).

Each sample container runs `runner.containers.samples.driver` as root with the driver's
capabilities (`DRIVER_CAPS`); it lays the tree out in a size-limited tmpfs, makes the
files the code under test must not change root-owned, runs the command as the sandbox
user with none, kills whatever the command left, and writes the output's head and tail
(and the files the rig reads back) where only it can write: its one outputs line, read
back here (`read_outputs`). With a server, the server runs in a container of its own
whose network namespace the criterion's container (or a browser criterion's browser)
joins; with a stack, the sample's compose project is up around it. Every container is
made through `ContainerEngine.create`, waited for within the host's deadline, removed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
import secrets
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from rig.guards.canary import Canary
from rig.sample.record import BrowserRan
from rig.sample.spec import SampleSpec
from runner.containers import browser, images, sandbox
from runner.containers.backend import NO_NETWORK, ContainerEngine, ContainerSpec, Labels, Tmpfs
from runner.containers.engine import disk_full
from runner.containers.images import BuiltImage
from runner.containers.images.facts import TMPFS_DIRS, ImageFacts
from runner.containers.samples import driver
from runner.containers.samples.driver import Outputs
from runner.containers.samples.inputs import FILLER, stream, volume
from runner.containers.samples.setting import HOME, IN_DIR, SampleSetting, observed
from runner.containers.stacks import StackRun, Stacks
from runner.containers.stacks.file import STACK_ENTRY
from runner.errors import (
    EngineDiskFullError,
    EngineError,
    EngineFailedError,
    EngineRestartedError,
    InfraError,
)

RUN_DIR = driver.RUN
# A sample container's exit when something outside stopped it (SIGTERM, SIGKILL to its
# driver): measured, every container a dockerd going down stops exits 143 under docker's
# init (137 when its PID 1 ignores SIGTERM for 10 s).
STOPPED_FROM_OUTSIDE = frozenset({128 + 15, 128 + 9})
LAYOUT_EXIT = 125  # the driver's: a layout that never happened (driver.BOOT)
RUN_TMPFS_MB = 256  # the command's whole output, before the rig keeps its head and tail
# The driver's outputs (`driver.OUT`: the log's head and tail, the observer's records, the
# files read back, a browser's): in memory, as every other directory a sample writes,
# never on the engine's disk. On the container's layer, an engine whose disk was full
# lost the observer's records while the command ran, and an honest pass was judged
# `tampered` ("the observer heard nothing"); measured in test_engine_outage.py.
# Above the most they hold at once: the driver's, all it reads back and one more file
# before it is weighed (just over 88 MiB); a browser's (`browser.OUTPUTS_LIMIT`, 72).
OUT_TMPFS_MB = 96
HOST_GRACE_S = 60
LINE_KEPT = 4096  # of a line of a server's driver read while it runs
SERVER_PORTS = (20000, 60000)
# The driver starts as root with these alone (to lay the tree out, drop to the sandbox
# user, and end its command at the deadline); the command runs with none.
DRIVER_USER = "0:0"
DRIVER_CAPS = ("CHOWN", "SETUID", "SETGID", "KILL")
SERVER_CGROUP = "server.cgroup"  # the server's container's cgroup dump, beside the sample's


@dataclass(frozen=True)
class ContainerResult:
    """What one sample's container came to (with its stack's, its server's and a browser
    criterion's browser's part, when it has them)."""

    exit_code: int | None = None
    outputs: Outputs = field(default_factory=Outputs)
    timed_out: bool = False
    oom_killed: bool = False
    layout_failed: str | None = None  # why the tree could not be laid out
    stack: StackRun | None = None  # the sample's stack, stopped
    outlived: bool = False  # the host's wait expired and it stopped the container
    browser: BrowserRan | None = None  # a browser criterion's browser
    canary: Canary | None = None  # a browser criterion's canaries (not the tree's)


@dataclass(frozen=True)
class Browsing:
    """A browser criterion's container, created beside its server, and what it was made
    with (its record says it)."""

    container: str
    token: str    # its canaries' (their files are written after the server's start)
    inputs: Path
    image: BuiltImage
    identity: browser.BrowserIdentity
    base_url: str
    limits: browser.BrowserLimits


class SampleContainers:
    """Runs one executor's sample containers: its image, limits and labels (`experiment`,
    `run`), what the image allows (`facts`), the samples' stacks (`stacks`); the browser
    image, when a browser criterion asks for it, resolved once."""

    def __init__(self, engine: ContainerEngine, experiment: str, run: str, image: BuiltImage,
                 limits: sandbox.SandboxLimits, facts: ImageFacts,
                 stacks: Stacks) -> None:
        self.engine, self.experiment, self.run = engine, experiment, run
        self.image, self.limits, self.facts, self.stacks = image, limits, facts, stacks
        self._browser: tuple[BuiltImage, browser.BrowserIdentity] | None = None

    def _labels(self, role: str, arm: str = "") -> Labels:
        return Labels(self.experiment, role, arm, self.run)

    def attached(self, spec: SampleSpec, setting: SampleSetting, command: list[str] | None,
                 say: Callable[[str], None], docker_cli: str) -> int:
        """The container of `DockerSampleExecutor.interactive`, attached to this terminal;
        removed after."""
        container = self.engine.create(self.container_spec(
            spec, setting, self.driver_argv("hold", spec, setting),
            purpose=f"a reproduction of {spec.sample}"))
        try:
            self._start(container, setting.inputs, f"a reproduction of {spec.sample}")
            if not self._held(spec, container):
                raise InfraError(f"sample {spec.sample}: the reproduction's tree could not be "
                                 "laid out", hint="re-run it without --shell / -- CMD to "
                                                  "see its record")
            database = "" if setting.schema is None else f", database {setting.schema.name}"
            say(f"{spec.sample}: {self.image.tag} ({self.image.image_id[:19]}), commit "
                f"{spec.commit[:12]}, network {setting.network}{database}; /work is a "
                "fresh copy: what you change here is discarded")
            timeout = str(max(1, int(spec.timeout_s)))
            run = (["-it", container, "bash"] if command is None else
                   [container, "timeout", "-k", "5", timeout, *command])
            return subprocess.run([docker_cli, "exec", "-u", sandbox.SANDBOX_USER, "-w",
                                   sandbox.WORKDIR, *run], check=False).returncode
        finally:
            self.engine.remove(container)

    def container_spec(self, spec: SampleSpec, setting: SampleSetting, command: list[str],
                       *, purpose: str, role: str = "sample",
                       joins: str | None = None) -> ContainerSpec:
        """A sample's container: the driver's user and capabilities, limits, labels,
        network, tmpfs mounts, env (its database URL a secret variable: a Secret's on a
        cluster, never in the Pod's spec); the rig's inputs come on its stdin (`_start`).
        `reproduce` re-creates a sample with exactly these. `joins`: the id of the
        sample's server container, whose network namespace the criterion shares."""
        disk = self.limits.disk_mb
        tmpfs = (*(Tmpfs(path, disk) for path in TMPFS_DIRS[1:]),
                 Tmpfs(sandbox.WORKDIR, disk, "0755"), Tmpfs(HOME, disk, "0755"),
                 Tmpfs(RUN_DIR, RUN_TMPFS_MB, "0700", executable=False),
                 Tmpfs(driver.OBS, 1, "0755", executable=False),
                 Tmpfs(driver.OUT, OUT_TMPFS_MB, "0700", executable=False),
                 Tmpfs(IN_DIR, driver.IN_MB, "0755", executable=False),
                 *(Tmpfs(path, disk, "0755") for path in self.facts.writable_dirs()))
        return ContainerSpec(
            image=self.image.image_id, command=tuple(command), purpose=purpose,
            labels=self._labels(role, spec.arm), resources=self.limits.resources(),
            user=DRIVER_USER, cap_add=DRIVER_CAPS, tmpfs=tmpfs, joins=joins,
            network=NO_NETWORK if joins is not None else setting.network,
            env={k: v for k, v in setting.env.items() if k not in setting.secrets},
            secret_env={k: v for k, v in setting.env.items() if k in setting.secrets},
            working_dir=sandbox.WORKDIR, stdin=True, resolve_outside=False)

    def driver_argv(self, mode: str, spec: SampleSpec, setting: SampleSetting,
               command: str | None = None, port: int | None = None) -> list[str]:
        """The container's command: its inputs from stdin, then the driver in `mode` (run |
        serve | hold)."""
        watch = "observe" if setting.tree is not None and observed(spec) else ""
        argv = ["sh", "-c", driver.BOOT, "bakeoff-boot", mode, sandbox.SANDBOX_USER,
                str(max(1, int(spec.timeout_s))), command or spec.command, watch]
        if spec.server is not None:
            server = spec.server
            argv += [server.run, server.health, server.port_env,
                     str(port or random.randint(*SERVER_PORTS)),
                     str(max(1, int(server.startup_timeout_s)))]
        return argv

    def run_sample(self, spec: SampleSpec, setting: SampleSetting) -> ContainerResult:
        """The sample's stack (if any) up and healthy, then its container, then the stack
        down; a stack that never got healthy runs no criterion."""
        if spec.stack is None:
            return self._run_containers(spec, setting)
        with self.stack_up(spec, setting) as run:
            ran = self._run_containers(spec, setting) if run.healthy else ContainerResult()
        return dataclasses.replace(ran, stack=run)

    @contextlib.contextmanager
    def stack_up(self, spec: SampleSpec, setting: SampleSetting) -> Iterator[StackRun]:
        """The sample's stack, up (healthy or not) for the block, down after it."""
        assert spec.stack is not None  # only asked for a sample with a stack
        (setting.inputs / "stack-entry.sh").write_text(STACK_ENTRY)
        labels = Labels(self.experiment, FILLER, spec.arm, self.run)
        filled = volume(self.engine, self.image.image_id, setting.inputs, labels,
                        f"bakeoff-{self.experiment}-{self.run}-{secrets.token_hex(4)}-inputs")
        try:
            run = self.stacks.start(spec, spec.stack, filled, setting.inputs.parent,
                                    setting.network, self.limits)
            try:
                yield run
            finally:
                self.stacks.stop(run)
        finally:
            self.engine.remove_volume(filled)

    def _run_containers(self, spec: SampleSpec, setting: SampleSetting) -> ContainerResult:
        """The sample's container (and its server's, if any), run and removed. The
        criterion is created before its server starts: on Kubernetes the two are one Pod,
        made at its first start, which takes no container after it."""
        port = random.randint(*SERVER_PORTS) if spec.server is not None else None
        server = None if port is None else self.engine.create(self.container_spec(
            spec, setting, self.driver_argv("serve", spec, setting, port=port),
            purpose=f"the server of {spec.sample}", role="sample-server"))
        made = [] if server is None else [server]
        try:
            browsing = None
            if spec.browser is not None and server is not None and port is not None:
                browsing = self._browser_beside(spec, server, port, setting.inputs / "browser")
                container = browsing.container
            else:
                container = self.engine.create(self.container_spec(
                    spec, setting, self.driver_argv("run", spec, setting, port=port),
                    purpose=f"sample {spec.sample}", joins=server))
            made.insert(0, container)
            if server is not None:
                self._start(server, setting.inputs, f"the server of {spec.sample}")
                if spec.build and not self._built(spec, server):
                    return ContainerResult(None, Outputs(self._server_outputs(server)))
            if browsing is not None and server is not None:
                return self._browse(spec, server, browsing)
            ran = self._wait(spec, container, setting.inputs)
            if server is not None:
                ran.outputs.files.update(self._server_outputs(server))
            return ran
        finally:
            for each in made:
                self.engine.remove(each)

    def _browser_beside(self, spec: SampleSpec, server: str, port: int,
                        inputs: Path) -> Browsing:
        """A browser criterion's container, created beside its server's (it joins the
        server's network namespace and opens http://localhost:PORT, a secure context),
        with the criterion as the contract froze it and the rig's canaries."""
        assert spec.browser is not None and spec.server is not None
        image, identity = self.browser()
        token = spec.token or secrets.token_hex(4)
        canary = browser.canary(token)  # its files are written once the server started
        base_url = f"http://localhost:{port}"
        argv = browser.command(
            browser.criterion_name(spec.browser), base_url, health=spec.server.health,
            wait_s=max(1, int(spec.server.startup_timeout_s)),
            timeout_s=max(1, int(spec.timeout_s)), extra=(canary.path,))
        limits = browser.BrowserLimits().on(self.engine)
        container = self.engine.create(browser.container_spec(
            image.image_id, server, browser.from_stdin(argv),
            self._labels("sample-browser", spec.arm), None, limits=limits,
            test_timeout_s=min(browser.TEST_TIMEOUT_S, spec.timeout_s),
            purpose=f"the browser of {spec.sample}"))
        return Browsing(container, token, inputs, image, identity, base_url, limits)

    def _browse(self, spec: SampleSpec, server: str, browsing: Browsing) -> ContainerResult:
        """The browser criterion run (its server started), then the server's log and build.
        Its inputs are written only now: the server's went before, without them."""
        assert spec.browser is not None
        canary = browser.prepare(spec.browser, browsing.inputs, browsing.token)
        ran = self._wait(spec, browsing.container, browsing.inputs, ready=None,
                         limit=browser.OUTPUTS_LIMIT)
        ran.outputs.files.update(self._server_outputs(server))
        found = browser.facts(browser.kept(ran.outputs), browsing.image, browsing.identity,
                              browsing.base_url, browsing.limits,
                              ran_as(self.engine, browsing.image.image_id))
        return dataclasses.replace(ran, browser=found, canary=canary)

    def browser(self) -> tuple[BuiltImage, browser.BrowserIdentity]:
        """The browser image (built on first use) and what it holds, asked once."""
        if self._browser is None:
            image = images.resolve(self.engine, browser.IMAGE)
            self._browser = (image, browser.installed(self.engine, image,
                                                      self._labels("tool-check")))
        return self._browser

    def _start(self, container: str, inputs: Path, what: str) -> None:
        """Start a sample's container with its inputs (staged in `inputs`) on its stdin."""
        with stream(inputs) as source:
            self.engine.start(container, source, what=what)

    def _held(self, spec: SampleSpec, container: str) -> bool:
        """Whether a `hold` container laid its tree out (its driver's `bakeoff-held` line),
        within the sample's deadline."""
        stop = threading.Timer(sandbox.host_deadline(spec.timeout_s, HOST_GRACE_S), _kill,
                               (self.engine, container))
        stop.start()
        try:
            return any(line.startswith(driver.HELD) for line in _lines(
                self.engine.follow_logs(container)))
        finally:
            stop.cancel()

    def _wait(self, spec: SampleSpec, container: str, inputs: Path,
              ready: str | None = "ready",
              limit: int = driver.OUTPUTS_LIMIT) -> ContainerResult:
        """Start `container` (its inputs, staged in `inputs`, on its stdin) and wait for it,
        within the host's deadline; what it came to."""
        began = time.monotonic()
        self._start(container, inputs, f"sample {spec.sample}")
        deadline = sandbox.host_deadline(spec.timeout_s, HOST_GRACE_S)
        if spec.server is not None:
            deadline += spec.server.startup_timeout_s
        if spec.build:  # the build runs first, under the same timeout
            deadline += sandbox.host_deadline(spec.timeout_s, grace_s=0)
        code = self.engine.wait(container, deadline)
        if code is None:
            # The deadline inside is root's: only a frozen sample (or engine) gets here.
            # Stopped, it is graded as a timeout the base decides (rig.sample.verdict rule 7).
            _kill(self.engine, container)
            return ContainerResult(None, Outputs(), outlived=True)
        elapsed = time.monotonic() - began
        oom = self.engine.inspect(container).oom_killed
        outputs = read_outputs(self.engine, container, limit)
        if ready is not None and ready not in outputs.files and not oom:
            self._require_engine(spec, container, code)
            tail = self.engine.logs(container, stdout=False, stderr=True,
                                    tail=20).decode(errors="replace").strip()
            return ContainerResult(code, outputs, layout_failed=(
                f"the sample's tree could not be laid out (exit {code}): {tail}"))
        timed_out = code in sandbox.TIMEOUT_EXIT_CODES and elapsed >= spec.timeout_s - 0.5
        return ContainerResult(code, outputs, timed_out, oom and not timed_out)

    def _require_engine(self, spec: SampleSpec, container: str, code: int) -> None:
        """A sample with no outputs whose log is EMPTY, though its driver (root's) always
        ends on its outputs line and no process of the sample may signal it: the engine
        lost it. Its disk full (the log is written there, and a full disk loses it with no
        error anywhere: `EngineDiskFullError`), or it stopped the container (a daemon
        going down stops every container: `EngineRestartedError`), or else it kept no log
        (`EngineFailedError`). An outage each time: the sample is cut and runs again,
        never graded as the arm's. A layout the driver refused (exit 125) or an OOM is
        the driver's own account, as before."""
        if code == LAYOUT_EXIT or self.engine.logs(container, stdout=True,
                                                   stderr=True, tail=1).strip():
            return
        full = disk_full(self.engine, self.image.image_id, self._labels("disk-probe", spec.arm))
        if full is not None:
            raise EngineDiskFullError(full.engine, f"keep the output of sample {spec.sample}",
                                      full.answer) from full
        if code in STOPPED_FROM_OUTSIDE:
            raise EngineRestartedError(self.engine.address, f"run sample {spec.sample}",
                                       f"its container was stopped from outside (exit "
                                       f"{code}) before it handed its output back")
        raise EngineFailedError(f"the engine at {self.engine.address} kept no log of sample "
                                f"{spec.sample} (exit {code}): the driver's output is lost",
                                hint="check the engine's disk and its log, then run the "
                                     "same command again: the sample runs again")

    def _built(self, spec: SampleSpec, server: str) -> bool:
        """Whether the server's build (run before the server starts) succeeded: its
        driver's one `bakeoff-built:` line, within the build's deadline (past it, the
        container is stopped and the build is what failed)."""
        stop = threading.Timer(sandbox.host_deadline(spec.timeout_s, HOST_GRACE_S), _kill,
                               (self.engine, server))
        stop.start()
        try:
            for line in _lines(self.engine.follow_logs(server)):
                if line.startswith(driver.BUILT):
                    return line[len(driver.BUILT):].strip() == b"0"
            return False
        finally:
            stop.cancel()

    def _server_outputs(self, server: str) -> dict[str, bytes]:
        """The server's log, once its driver was told to stop (it keeps head and tail), and
        its container's cgroup dump (`SERVER_CGROUP`)."""
        with contextlib.suppress(EngineError):
            self.engine.stop(server, grace_s=10, what="the server")
        found = read_outputs(self.engine, server).files
        names = ("server.log", "build", "build.log")
        kept: dict[str, bytes] = {name: found[name] for name in names if name in found}
        if "cgroup" in found:  # the server's own container's use (rig.headroom)
            kept[SERVER_CGROUP] = found["cgroup"]
        return kept



def ran_as(engine: ContainerEngine, image: str) -> str:
    """`image` as the engine ran it, for the record, when that is not `image` itself (a
    cluster: the registry's `repo@sha256:...`); empty on Docker."""
    ref = engine.image_ref(image)
    return "" if ref == image else ref


def _kill(engine: ContainerEngine, container: str) -> None:
    """Stop a container past its deadline (one that stopped meanwhile is fine)."""
    with contextlib.suppress(EngineError):
        engine.kill(container, what="a container past its deadline")


def _lines(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """A container's log stream as lines (a line may come in several chunks)."""
    rest = b""
    for chunk in chunks:
        rest += chunk
        *whole, rest = rest.split(b"\n")
        yield from whole
        rest = rest[-LINE_KEPT:]  # only the driver writes here: no line of its is longer
    if rest:
        yield rest


def read_outputs(engine: ContainerEngine, container: str,
                 limit: int = driver.OUTPUTS_LIMIT) -> Outputs:
    """The driver's output directory, from the one line it writes to its stdout (the
    container's log: nothing of the sample's command can write there), streamed
    (`driver.read_outputs`: decoded as it comes, bounded)."""
    chunks = engine.follow_logs(container, follow=False)
    return driver.read_outputs(chunks, limit)
