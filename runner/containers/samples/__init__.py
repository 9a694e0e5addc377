"""The docker `SampleExecutor`: each sample in a FRESH container, from a fresh copy of the
commit's tree (from git objects, never a live checkout), with the rig's layer on top
(`runner.containers.samples.tree`: the base's harness and protected files, no bytecode,
canaries), a fresh empty database, the network off (only the database is reachable),
then removed.

The container runs `runner.containers.samples.driver` as root with three capabilities
(CHOWN, SETUID, SETGID); it lays the tree out in a size-limited tmpfs, makes the files
the code under test must not change root-owned, runs the command as the sandbox user
with none, kills whatever the command left, and writes the output's head and tail (and
the files the rig reads back) where only it can write. Nothing of a sample touches the
host's disk but the rig's own inputs.

The executor composes what the image allows (`image_facts.ImageFacts`: missing tools,
writable paths, the user site) and where samples reach their database
(`sample_network.SampleNetworks`); every container it makes goes through
`ContainerEngine.create`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import random
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from types import TracebackType

from rig import headroom
from rig.guards import canary as canary_mod
from rig.guards import inprocess
from rig.guards.canary import Canary
from rig.preflight import program_of
from rig.sample import links
from rig.sample.record import BrowserRan
from rig.sample.spec import Execution, SampleSpec
from rig.sample.tree import Caps, Entry, Indexed, UnsafeTreeError
from runner.containers import browser, database, images, sandbox
from runner.containers import stacks as stack
from runner.containers.backend import (
    LABEL_EXPERIMENT,
    LABEL_RUN,
    NO_NETWORK,
    ContainerEngine,
    ContainerSpec,
    Labels,
    Tmpfs,
)
from runner.containers.engine import disk_full
from runner.containers.images import BuiltImage
from runner.containers.images.facts import TMPFS_DIRS, ImageFacts
from runner.containers.samples import driver as sample_driver
from runner.containers.samples import inputs as sample_inputs
from runner.containers.samples import tree as sample_tree
from runner.containers.samples.driver import Outputs
from runner.containers.samples.network import SampleNetworks
from runner.containers.stacks import file as stack_file
from runner.errors import (
    ComposeError,
    DatabaseError,
    EngineDiskFullError,
    EngineError,
    EngineFailedError,
    EngineRestartedError,
    EngineUnreachableError,
    InfraError,
    SandboxUnavailableError,
)

HOME = sandbox.HOME
# A sample container's exit when something outside stopped it (SIGTERM, SIGKILL to its
# driver): measured, every container a dockerd going down stops exits 143 under docker's
# init (137 when its PID 1 ignores SIGTERM for 10 s).
STOPPED_FROM_OUTSIDE = frozenset({128 + 15, 128 + 9})
LAYOUT_EXIT = 125  # the driver's: a layout that never happened (sample_driver.BOOT)
# How long a database failure waits to see its server stop (an outage under way) before
# it is graded: docker stops a container within 10 s (SIGTERM, then SIGKILL).
STOP_GRACE_S = 12.0
IN_DIR, RUN_DIR = sample_driver.IN, sample_driver.RUN
RUN_TMPFS_MB = 256  # the command's whole output, before the rig keeps its head and tail
HOST_GRACE_S = 60
LINE_KEPT = 4096  # of a line of a server's driver read while it runs
SERVER_PORTS = (20000, 60000)
# The driver starts as root with these alone (to lay the tree out, drop to the sandbox
# user, and end its command at the deadline); the command runs with none.
DRIVER_USER = "0:0"
DRIVER_CAPS = ("CHOWN", "SETUID", "SETGID", "KILL")
OBSERVER_FILES = {"plugin/bakeoff_hook.py": "observer_hook.py",
                  "plugin/sitecustomize.py": "observer_site.py",
                  f"plugin/{canary_mod.PLUGIN_MODULE}.py": "observer_plugin.py",
                  "observe/reader.py": "observer_reader.py"}


def redact_url(url: str) -> str:
    """postgresql://role:secret@host -> postgresql://role:***@host."""
    head, at, tail = url.partition("@")
    if not at or ":" not in head.split("//", 1)[-1]:
        return url
    scheme_user, _, _ = head.rpartition(":")
    return f"{scheme_user}:***@{tail}"


@dataclass(frozen=True)
class SampleSetting:
    """Where one sample runs: its inputs, network, schema, env, and its tree."""

    inputs: Path  # the host directory mounted read-only at /bakeoff/in
    env: dict[str, str]
    network: str
    schema: database.DbSchema | None
    tree: sample_tree.SampleTree | None  # None: the tree was refused
    refused: str | None = None


@dataclass(frozen=True)
class Ran:
    """What one sample container came to."""

    exit_code: int | None = None
    outputs: Outputs = field(default_factory=Outputs)
    timed_out: bool = False
    oom_killed: bool = False
    layout_failed: str | None = None  # why the tree could not be laid out
    stack: stack.StackRun | None = None  # the sample's stack, stopped
    outlived: bool = False  # the host's wait expired and it stopped the container
    browser: BrowserRan | None = None  # a browser criterion's browser
    canary: Canary | None = None  # a browser criterion's canaries (not the tree's)


class DockerSampleExecutor:
    """Runs samples for one experiment; owns its sample networks (and Postgres, if any)."""

    def __init__(self, engine: ContainerEngine, repo: Path, experiment: str, image: BuiltImage,
                 limits: sandbox.SandboxLimits, url_env: str | None = None,
                 db_image: BuiltImage | None = None,
                 shared_db: database.DbServer | None = None,
                 db_policy: database.DbPolicy | None = None) -> None:
        self.engine, self.repo, self.experiment = engine, repo, experiment
        self.image, self.limits, self.url_env = image, limits, url_env
        self.run = secrets.token_hex(3)
        self.networks = SampleNetworks(engine, experiment, self.run, db_image, shared_db,
                                       db_policy)
        self.stacks = stack.Stacks(engine, experiment, self.run)
        self.facts = ImageFacts(engine, repo, experiment, image, self._labels("tool-check"))
        self.scratch = Path(tempfile.mkdtemp(prefix=f"bakeoff-{experiment}-samples-"))
        self.scratch.chmod(0o755)
        self.trees = sample_tree.Trees(repo, Caps(limits.max_files, limits.disk_mb * 1024 * 1024))
        self._browser: tuple[BuiltImage, browser.BrowserIdentity] | None = None

    def __enter__(self) -> DockerSampleExecutor:
        self.setup()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            self.teardown()
        except InfraError:
            if error is None:
                raise
            # Never in place of why the block ended (an outage: the samples it cut; the
            # engine, just back, still refusing a network): `gc` sweeps what is left.

    def setup(self) -> None:
        """Before the first sample: the executor's own Postgres, when none is shared."""
        self.networks.start()

    def teardown(self) -> None:
        """After the last sample: every network, container and file it made is gone."""
        shutil.rmtree(self.scratch, ignore_errors=True)
        self.networks.detach()
        self.engine.remove_labelled({LABEL_EXPERIMENT: self.experiment, LABEL_RUN: self.run})

    def missing_tools(self, tools: Sequence[str]) -> tuple[str, ...]:
        """The tools not on PATH in this executor's image (`up`'s preflight asks)."""
        return self.facts.missing_tools(tools)

    def _labels(self, role: str, arm: str = "") -> Labels:
        return Labels(self.experiment, role, arm, self.run)

    # -- one sample ----------------------------------------------------------------------

    def execute(self, spec: SampleSpec,
                extra_env: Mapping[str, str] | None = None) -> Execution:
        """One sample in a fresh container. `extra_env` (reproduce: the recorded env, its
        secrets re-read from the environment) is laid over the sample's own env."""
        started = time.monotonic()
        if spec.refused is not None:
            return self._refused(spec.refused, started)
        try:
            return self._execute(spec, started, extra_env)
        except (EngineError, DatabaseError, ComposeError) as error:
            return Execution(exit_code=None, log="", duration_s=time.monotonic() - started,
                             infra_error=f"the rig failed: {error}", image=self.image.tag,
                             image_id=self.image.image_id,
                             image_identity=self.image.identity,
                             interrupted=self.outage(error))

    def outage(self, error: Exception) -> str | None:
        """Whether `error` (raised under a sample) was an outage, not a result: the
        engine broke or stopped answering (not a refusal: those keep the engine's words
        and are graded), or the database server the samples use is down. None: the
        engine and the server are up, so the error is the differential rule's to judge."""
        down = self.engine.down()
        if down is not None:
            return down
        if isinstance(error, EngineFailedError | EngineUnreachableError):
            return str(error).splitlines()[0]
        return self.networks.server_down(
            within_s=STOP_GRACE_S if isinstance(error, DatabaseError) else 0.0)

    def _refused(self, why: str, started: float) -> Execution:
        return Execution(exit_code=None, log=f"bakeoff-rig: nothing run: {why}\n",
                         duration_s=time.monotonic() - started, refused=why,
                         image=self.image.tag, image_id=self.image.image_id,
                         image_identity=self.image.identity, limits=self.limits.as_record())

    def _execute(self, spec: SampleSpec, started: float,
                 extra_env: Mapping[str, str] | None = None) -> Execution:
        program = _program(spec)
        missing = self.facts.missing_tools((*spec.requires, *([program] if program else [])))
        unsafe = self.facts.unsafe()
        if unsafe is not None:
            raise SandboxUnavailableError(unsafe)
        done: list[Execution] = []
        try:
            with self.setting(spec, extra_env) as setting:
                if setting.tree is None:
                    return self._refused(setting.refused or "unsafe tree", started)
                ran = Ran() if missing else self._run(spec, setting)
                done.append(self._execution(spec, setting, setting.tree, ran, missing,
                                            started))
        except (EngineError, DatabaseError, ComposeError):
            if not done:
                raise
            # The sample ran to its end and its outputs were read: only what the rig
            # removes after it (its database, its network) failed. Still its result (an
            # arm cannot void its own sample by breaking the teardown); `gc` sweeps.
        return done[0]

    def _execution(self, spec: SampleSpec, setting: SampleSetting,
                   tree: sample_tree.SampleTree, ran: Ran, missing: tuple[str, ...],
                   started: float) -> Execution:
        """The sample's record of what ran, as the oracle grades it."""
        program = _program(spec)
        outputs, problem = ran.outputs, ran.layout_failed
        log = (f"bakeoff-rig: not on PATH in {self.image.tag}: {' '.join(missing)}\n"
               if missing else outputs.text("log"))
        build = outputs.text("build").strip()
        build_exit = int(build) if build.isdigit() else None
        return Execution(
            exit_code=ran.exit_code if build_exit in (None, 0) else None, log=log,
            duration_s=time.monotonic() - started, build_exit=build_exit,
            build_log=outputs.text("build.log"),
            server=(outputs.text("server").strip() or "none") if spec.server else "none",
            server_log=outputs.text("server.log"), timed_out=ran.timed_out,
            oom_killed=ran.oom_killed, program_present=program is None or program not in missing,
            missing_tools=missing, image=self.image.tag, image_id=self.image.image_id,
            image_identity=self.image.identity,
            env={k: redact_url(v) if k == self.url_env else v for k, v in setting.env.items()},
            mounts=self.mounts_record(spec), limits=self.limits.as_record(),
            network=setting.network,
            db_schema=None if setting.schema is None else setting.schema.name,
            protected=tree.protected, files=outputs.collected(),
            canary=tree.canary if ran.canary is None else ran.canary,
            observed=observed(spec) and not problem,
            observation=(outputs.text("observer.jsonl") if observed(spec) and not problem
                         else None), outlived=ran.outlived,
            pinned=tree.pinned, truncated=int(outputs.text("log.truncated") or 0),
            infra_error=problem, layout_failed=problem is not None,
            stack=None if ran.stack is None else ran.stack.as_record(),
            stack_detail="" if ran.stack is None else ran.stack.detail,
            stack_log="" if ran.stack is None else ran.stack.log,
            browser_run=ran.browser, browser_files={} if ran.browser is None
            else browser.kept(outputs), engine=self.engine.identity.as_record(),
            usage=headroom.usage(outputs.text("cgroup")),
            server_usage=headroom.usage(outputs.text(SERVER_CGROUP)))

    def interactive(self, spec: SampleSpec, extra_env: Mapping[str, str],
                    command: list[str] | None, say: Callable[[str], None]) -> int:
        """`reproduce --shell` (command None: a shell on a TTY) or `reproduce -- CMD`: the
        sample's container as `execute` makes it, attached to this terminal through the
        docker CLI; its exit code. The tree is a fresh copy: what is changed is lost."""
        docker_cli = shutil.which("docker")
        if docker_cli is None:
            raise InfraError("the docker CLI is needed to attach to the container",
                             hint="apt-get install docker.io (the CLI), or reproduce without "
                                  "--shell / -- CMD to re-run the sample")
        with self.setting(spec, extra_env) as setting:
            if setting.tree is None:
                raise InfraError(f"sample {spec.sample}: its tree is unsafe to lay out: "
                                 f"{setting.refused}", hint="read the record's detail")
            with (self._stack(spec, setting) if spec.stack is not None
                  else contextlib.nullcontext(None)) as run:
                if run is not None:
                    say(f"{spec.sample}: stack {run.project} "
                        f"{'healthy' if run.healthy else 'never got healthy: ' + run.detail}")
                return self._attached(spec, setting, command, say, docker_cli)

    def _attached(self, spec: SampleSpec, setting: SampleSetting, command: list[str] | None,
                  say: Callable[[str], None], docker_cli: str) -> int:
        """`interactive`'s container, attached to this terminal; removed after."""
        container = self.engine.create(self.container_spec(
            spec, setting, self.driver("hold", spec, setting),
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

    def mounts_record(self, spec: SampleSpec) -> tuple[Mapping[str, str], ...]:
        return ({"type": "tmpfs", "target": sandbox.WORKDIR,
                 "source": f"fresh tree of {spec.commit} from git objects"},
                {"type": "stdin", "target": IN_DIR,
                 "source": "the rig's inputs, streamed through the engine (read-only)"})

    @contextlib.contextmanager
    def setting(self, spec: SampleSpec,
                extra_env: Mapping[str, str] | None = None) -> Iterator[SampleSetting]:
        """A sample's inputs, network, database and env; all gone when the block ends."""
        inputs = Path(tempfile.mkdtemp(prefix="sample-", dir=self.scratch))
        inputs.chmod(0o755)
        try:
            tree, refused = self._tree(spec, inputs)
            own = (self.networks.own_network(spec.arm) if spec.stack is not None
                   and tree is not None else contextlib.nullcontext(None))
            fresh = (self.networks.fresh_database() if tree is not None
                     else contextlib.nullcontext(None))
            with own as stack_network, fresh as schema:
                network = stack_network or self.networks.network(spec.arm)
                env = self._env(spec, tree, schema, extra_env)
                yield SampleSetting(inputs, env, network, schema, tree, refused)
        finally:
            shutil.rmtree(inputs, ignore_errors=True)

    def _env(self, spec: SampleSpec, tree: sample_tree.SampleTree | None,
             schema: database.DbSchema | None,
             extra_env: Mapping[str, str] | None) -> dict[str, str]:
        """The sample's env: the rig's, the canary's, the database URL, then `extra_env`
        (reproduce: the recorded env, its secrets re-read from the environment)."""
        env = {"HOME": HOME, "BAKEOFF_SAMPLE": spec.sample, "PYTHONSAFEPATH": "1"}
        if tree is not None and observed(spec):  # the rig's observer and its plugin
            env.update({"PYTEST_ADDOPTS": f"-p {canary_mod.PLUGIN_MODULE}",
                        "PYTHONPATH": canary_mod.PLUGIN_DIR})
        if tree is not None:  # the runner's (go: -v) and the canaries' (node: a preload)
            env.update(inprocess.runner_env(spec.parser))
            env.update(toolchain_env(tree))
            env.update(dict(tree.canary.env) if tree.canary is not None else {})
        if schema is not None and self.url_env:
            env[self.url_env] = schema.url()
        env.update(extra_env or {})
        return env

    def _tree(self, spec: SampleSpec,
              inputs: Path) -> tuple[sample_tree.SampleTree | None, str | None]:
        """The sample's tree, written to `inputs`; (None, why) when it is unsafe. The base's
        tree past the limits (or unreadable) is the rig's problem, never an arm's."""
        try:
            tree = Indexed(self.trees.checked(spec.commit))  # a copy the rig's layer changes
        except UnsafeTreeError as error:
            if spec.commit != spec.base_commit:
                return None, error.message
            raise base_unsafe(spec, error) from error
        try:
            base = (self.trees.checked(spec.base_commit)
                    if spec.protected or spec.harness == "base" else None)
        except UnsafeTreeError as error:
            raise base_unsafe(spec, error) from error
        try:  # the arm's links that cannot be laid out within the sample's caps
            built = sample_tree.build(spec, tree, base, inputs / "tree.tar", self.repo,
                                      spec.token, importable=self.facts.python_modules(),
                                      caps=links.LayoutCaps(self.limits.disk_mb * 1024 * 1024,
                                                            self.limits.max_files))
        except UnsafeTreeError as error:
            return None, error.message
        (inputs / "root-owned").write_bytes(sample_tree.nul_list(built.root_owned))
        (inputs / "root-dirs").write_bytes(sample_tree.nul_list(built.root_dirs))
        (inputs / "collect").write_text("".join(f"{p}\n" for p in spec.collect))
        (inputs / "driver.sh").write_text(sample_driver.script())
        if spec.build:  # one command a line, the first failure ends it
            (inputs / "build.sh").write_text("set -e\n" + "".join(f"{c}\n" for c in spec.build))
        (inputs / "usercustomize.py").write_text(sample_driver.USERCUSTOMIZE)
        (inputs / "user-site").write_text(self.facts.user_site())
        (inputs / "empty").write_bytes(b"")
        if observed(spec):
            self._observer_inputs(inputs, built)
        for path in inputs.rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)
        return built, None

    def _observer_inputs(self, inputs: Path, built: sample_tree.SampleTree) -> None:
        """The observer (`rig/guards/insample/`): its hook as the sample's `sitecustomize`, its
        pytest plugin, the root reader, and what the hook checks against: the pinned
        files' sha256, the plugin's, where code is the tree's (writable) or the image's."""
        for target, source in OBSERVER_FILES.items():
            (inputs / target).parent.mkdir(mode=0o755, exist_ok=True)
            (inputs / target).write_bytes(insample(source))
        plugin = f"{canary_mod.PLUGIN_MODULE}.py"
        site = self.facts.user_site()
        canary = built.canary
        config = {
            "socket": f"{sample_driver.OBS}/sock",
            "plugin_paths": [f"{canary_mod.PLUGIN_DIR}/{plugin}",
                             *([f"{site}/{plugin}"] if site else [])],
            "plugin_sha256": hashlib.sha256(insample("observer_plugin.py")).hexdigest(),
            "pinned": {f"{sandbox.WORKDIR}/{path}": digest
                       for path, digest in built.pinned_sha256.items()},
            "canary_path": None if canary is None else f"{sandbox.WORKDIR}/{canary.path}",
            "untrusted": [f"{d.rstrip('/')}/" for d in (*TMPFS_DIRS, HOME, "/dev/shm",
                                                        *self.facts.writable_dirs())],
            "trusted": [f"{IN_DIR}/"], "user_site": self.facts.user_site()}
        (inputs / "observe" / "config.json").write_text(json.dumps(config, indent=1))

    def checked_tree(self, commit: str) -> Mapping[str, Entry]:
        """`commit`'s tree as its samples read it, checked (`UnsafeTreeError`); shared,
        never to be changed."""
        return self.trees.checked(commit)

    def container_spec(self, spec: SampleSpec, setting: SampleSetting, command: list[str],
                       *, purpose: str, role: str = "sample",
                       joins: str | None = None) -> ContainerSpec:
        """A sample's container: the driver's user and capabilities, limits, labels,
        network, tmpfs mounts; the rig's inputs come on its stdin (`_start`). `reproduce`
        re-creates a sample with exactly these. `joins`: the id of the sample's server
        container, whose network namespace the criterion shares."""
        disk = self.limits.disk_mb
        tmpfs = (*(Tmpfs(path, disk) for path in TMPFS_DIRS[1:]),
                 Tmpfs(sandbox.WORKDIR, disk, "0755"), Tmpfs(HOME, disk, "0755"),
                 Tmpfs(RUN_DIR, RUN_TMPFS_MB, "0700", executable=False),
                 Tmpfs(sample_driver.OBS, 1, "0755", executable=False),
                 Tmpfs(IN_DIR, sample_driver.IN_MB, "0755", executable=False),
                 *(Tmpfs(path, disk, "0755") for path in self.facts.writable_dirs()))
        return ContainerSpec(
            image=self.image.image_id, command=tuple(command), purpose=purpose,
            labels=self._labels(role, spec.arm), resources=self.limits.resources(),
            user=DRIVER_USER, cap_add=DRIVER_CAPS, tmpfs=tmpfs, joins=joins,
            network=NO_NETWORK if joins is not None else setting.network, env=setting.env,
            working_dir=sandbox.WORKDIR, stdin=True)

    def driver(self, mode: str, spec: SampleSpec, setting: SampleSetting,
               command: str | None = None, port: int | None = None) -> list[str]:
        """The container's command: its inputs from stdin, then the driver in `mode` (run |
        serve | hold)."""
        watch = "observe" if setting.tree is not None and observed(spec) else ""
        argv = ["sh", "-c", sample_driver.BOOT, "bakeoff-boot", mode, sandbox.SANDBOX_USER,
                str(max(1, int(spec.timeout_s))), command or spec.command, watch]
        if spec.server is not None:
            server = spec.server
            argv += [server.run, server.health, server.port_env,
                     str(port or random.randint(*SERVER_PORTS)),
                     str(max(1, int(server.startup_timeout_s)))]
        return argv

    def _run(self, spec: SampleSpec, setting: SampleSetting) -> Ran:
        """The sample's stack (if any) up and healthy, then its container, then the stack
        down; a stack that never got healthy runs no criterion."""
        if spec.stack is None:
            return self._run_sample(spec, setting)
        with self._stack(spec, setting) as run:
            ran = self._run_sample(spec, setting) if run.healthy else Ran()
        return dataclasses.replace(ran, stack=run)

    @contextlib.contextmanager
    def _stack(self, spec: SampleSpec, setting: SampleSetting) -> Iterator[stack.StackRun]:
        """The sample's stack, up (healthy or not) for the block, down after it."""
        assert spec.stack is not None  # only asked for a sample with a stack
        (setting.inputs / "stack-entry.sh").write_text(stack_file.STACK_ENTRY)
        labels = Labels(self.experiment, sample_inputs.FILLER, spec.arm, self.run)
        volume = sample_inputs.volume(self.engine, self.image.image_id, setting.inputs, labels,
                                      f"bakeoff-{self.experiment}-{self.run}-"
                                      f"{secrets.token_hex(4)}-inputs")
        try:
            run = self.stacks.start(spec, spec.stack, volume, setting.inputs.parent,
                                    setting.network, self.limits)
            try:
                yield run
            finally:
                self.stacks.stop(run)
        finally:
            self.engine.remove_volume(volume)

    def _run_sample(self, spec: SampleSpec, setting: SampleSetting) -> Ran:
        """The sample's container (and its server's, if any), run and removed."""
        port = random.randint(*SERVER_PORTS) if spec.server is not None else None
        server = None if port is None else self._server(spec, setting, port)
        container: str | None = None
        try:
            if server is not None and spec.build and not self._built(spec, server):
                return Ran(None, Outputs(self._server_outputs(server)))
            if spec.browser is not None and server is not None and port is not None:
                return self._browse(spec, setting, server, port)
            container = self.engine.create(self.container_spec(
                spec, setting, self.driver("run", spec, setting, port=port),
                purpose=f"sample {spec.sample}", joins=None if server is None else server))
            ran = self._wait(spec, container, setting.inputs)
            if server is not None:
                ran.outputs.files.update(self._server_outputs(server))
            return ran
        finally:
            for made in (container, server):
                if made is not None:
                    self.engine.remove(made)

    def _browse(self, spec: SampleSpec, setting: SampleSetting, server: str,
                port: int) -> Ran:
        """A browser criterion: the rig's pytest in the browser's own container, which
        joins the server's network namespace and opens http://localhost:PORT (a secure
        context), with the criterion as the contract froze it and the rig's canaries; the
        server's log and build after."""
        assert spec.browser is not None and spec.server is not None
        image, identity = self.browser()
        inputs = setting.inputs / "browser"
        canary = browser.prepare(spec.browser, inputs, spec.token or secrets.token_hex(4))
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
        try:
            ran = self._wait(spec, container, inputs, ready=None, limit=browser.OUTPUTS_LIMIT)
        finally:
            self.engine.remove(container)
        ran.outputs.files.update(self._server_outputs(server))
        found = browser.facts(browser.kept(ran.outputs), image, identity, base_url, limits)
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
        with sample_inputs.stream(inputs) as source:
            self.engine.start(container, source, what=what)

    def _held(self, spec: SampleSpec, container: str) -> bool:
        """Whether a `hold` container laid its tree out (its driver's `bakeoff-held` line),
        within the sample's deadline."""
        stop = threading.Timer(sandbox.host_deadline(spec.timeout_s, HOST_GRACE_S), _kill,
                               (self.engine, container))
        stop.start()
        try:
            return any(line.startswith(sample_driver.HELD) for line in _lines(
                self.engine.follow_logs(container)))
        finally:
            stop.cancel()

    def _wait(self, spec: SampleSpec, container: str, inputs: Path,
              ready: str | None = "ready", limit: int = sample_driver.OUTPUTS_LIMIT) -> Ran:
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
            return Ran(None, Outputs(), outlived=True)
        elapsed = time.monotonic() - began
        oom = self.engine.inspect(container).oom_killed
        outputs = read_outputs(self.engine, container, limit)
        if ready is not None and ready not in outputs.files and not oom:
            self._require_engine(spec, container, code)
            tail = self.engine.logs(container, stdout=False, stderr=True,
                                    tail=20).decode(errors="replace").strip()
            return Ran(code, outputs, layout_failed=(
                f"the sample's tree could not be laid out (exit {code}): {tail}"))
        timed_out = code in sandbox.TIMEOUT_EXIT_CODES and elapsed >= spec.timeout_s - 0.5
        return Ran(code, outputs, timed_out, oom and not timed_out)

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

    def _server(self, spec: SampleSpec, setting: SampleSetting, port: int) -> str:
        """The sample's server, started in a container of its own (its own tree, HOME and
        /tmp): the criterion's container shares only its network namespace."""
        server = self.engine.create(self.container_spec(
            spec, setting, self.driver("serve", spec, setting, port=port),
            purpose=f"the server of {spec.sample}", role="sample-server"))
        try:
            self._start(server, setting.inputs, f"the server of {spec.sample}")
        except BaseException:
            self.engine.remove(server)
            raise
        return server

    def _built(self, spec: SampleSpec, server: str) -> bool:
        """Whether the server's build (run before the server starts) succeeded: its
        driver's one `bakeoff-built:` line, within the build's deadline (past it, the
        container is stopped and the build is what failed)."""
        stop = threading.Timer(sandbox.host_deadline(spec.timeout_s, HOST_GRACE_S), _kill,
                               (self.engine, server))
        stop.start()
        try:
            for line in _lines(self.engine.follow_logs(server)):
                if line.startswith(sample_driver.BUILT):
                    return line[len(sample_driver.BUILT):].strip() == b"0"
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


EMPTY = f"{IN_DIR}/empty"  # a root-owned empty file of the rig's inputs
SERVER_CGROUP = "server.cgroup"  # the server's container's cgroup dump, beside the sample's


def toolchain_env(tree: sample_tree.SampleTree) -> dict[str, str]:
    """The toolchains' per-user configuration is the rig's empty file, so a step before
    the runner cannot write one the runner then reads (`go env -w`, `~/.npmrc`); and
    without a go.work at the root, no workspace file anyone writes is read either."""
    env = {"GOENV": EMPTY, "NPM_CONFIG_USERCONFIG": EMPTY}
    if not tree.go_work:
        env["GOWORK"] = "off"
    return env


def base_unsafe(spec: SampleSpec, error: UnsafeTreeError) -> SandboxUnavailableError:
    """The base's tree past the limits (or unreadable): the rig's problem (RIG_ERROR
    infra), never an arm's FAIL."""
    return SandboxUnavailableError(
        f"the base's tree ({spec.base_commit[:12]}) cannot be laid out: {error.message}; "
        "raise [limits].max_files or disk_mb if it is only too large")


def _program(spec: SampleSpec) -> str | None:
    """The program the sample's command starts in its image (a browser criterion's is the
    rig's pytest, in the browser's image)."""
    return None if spec.browser is not None else program_of(spec.command)


def observed(spec: SampleSpec) -> bool:
    """Whether a sample gets the rig's observer: every pytest run of the tree's (a ratchet
    is graded on its metric, never on its tests; a browser criterion's pytest is the rig's,
    in the browser's container, where nothing of the arm's runs but the page)."""
    return spec.parser == "pytest" and spec.ratchet is None and spec.browser is None


def insample(name: str) -> bytes:
    """A program of `rig/guards/insample/` (it runs inside the sample, never here)."""
    return resources.files("rig.guards.insample").joinpath(name).read_bytes()


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
                 limit: int = sample_driver.OUTPUTS_LIMIT) -> Outputs:
    """The driver's output directory, from the one line it writes to its stdout (the
    container's log: nothing of the sample's command can write there), streamed
    (`sample_driver.read_outputs`: decoded as it comes, bounded)."""
    chunks = engine.follow_logs(container, follow=False)
    return sample_driver.read_outputs(chunks, limit)
