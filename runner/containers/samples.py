"""The docker `SampleExecutor`: each sample in a FRESH container, from a fresh copy of the
commit's tree (from git objects, never a live checkout), with the rig's layer on top
(`runner.containers.sample_tree`: the base's harness and protected files, no bytecode,
canaries), a fresh empty database, the network off (only the database is reachable),
then removed.

The container runs `runner.containers.sample_driver` as root with three capabilities
(CHOWN, SETUID, SETGID); it lays the tree out in a size-limited tmpfs, makes the files
the code under test must not change root-owned, runs the command as the sandbox user
with none, kills whatever the command left, and writes the output's head and tail (and
the files the rig reads back) where only it can write. Nothing of a sample touches the
host's disk but the rig's own inputs.

The executor composes what the image allows (`image_facts.ImageFacts`: missing tools,
writable paths, the user site) and where samples reach their database
(`sample_network.SampleNetworks`); every container it makes goes through
`engine.create_container`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import docker.errors
import requests

from rig.canary import RESULTS_DIR, RESULTS_FILE
from rig.oracle import Execution, SampleSpec
from rig.preflight import program_of
from rig.tree import Tree, UnsafeTreeError
from runner.containers import database, sample_driver, sample_tree, sandbox, stack
from runner.containers.engine import (
    LABEL_EXPERIMENT,
    LABEL_RUN,
    NO_NETWORK,
    Bind,
    ContainerSpec,
    Engine,
    Labels,
    Tmpfs,
    create_container,
)
from runner.containers.image_facts import TMPFS_DIRS, ImageFacts
from runner.containers.images import BuiltImage
from runner.containers.sample_driver import Outputs, parse_outputs
from runner.containers.sample_network import SampleNetworks
from runner.errors import ComposeError, DatabaseError, InfraError, SandboxUnavailableError

HOME = sandbox.HOME
IN_DIR, RUN_DIR = sample_driver.IN, sample_driver.RUN
RUN_TMPFS_MB = 256  # the command's whole output, before the rig keeps its head and tail
HOST_GRACE_S = 60
SERVER_PORTS = (20000, 60000)
# The driver starts as root with these alone (to lay the tree out and drop to the sandbox
# user); the command runs with none.
DRIVER_USER = "0:0"
DRIVER_CAPS = ("CHOWN", "SETUID", "SETGID")


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


class DockerSampleExecutor:
    """Runs samples for one experiment; owns its sample networks (and Postgres, if any)."""

    def __init__(self, engine: Engine, repo: Path, experiment: str, image: BuiltImage,
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
        self.lock = threading.Lock()
        self.scratch = Path(tempfile.mkdtemp(prefix=f"bakeoff-{experiment}-samples-"))
        self.scratch.chmod(0o755)
        self.trees: dict[str, Tree] = {}  # commit -> its checked tree (bases are reused)

    def __enter__(self) -> DockerSampleExecutor:
        self.setup()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.teardown()

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
        except (SandboxUnavailableError, docker.errors.APIError,
                requests.exceptions.RequestException, DatabaseError, ComposeError) as error:
            return Execution(exit_code=None, log="", duration_s=time.monotonic() - started,
                             infra_error=f"the rig failed: {error}", image=self.image.tag,
                             image_id=self.image.image_id,
                             image_identity=self.image.identity)

    def _refused(self, why: str, started: float) -> Execution:
        return Execution(exit_code=None, log=f"bakeoff-rig: nothing run: {why}\n",
                         duration_s=time.monotonic() - started, refused=why,
                         image=self.image.tag, image_id=self.image.image_id,
                         image_identity=self.image.identity, limits=self.limits.as_record())

    def _execute(self, spec: SampleSpec, started: float,
                 extra_env: Mapping[str, str] | None = None) -> Execution:
        program = program_of(spec.command)
        missing = self.facts.missing_tools((*spec.requires, *([program] if program else [])))
        unsafe = self.facts.unsafe()
        if unsafe is not None:
            raise SandboxUnavailableError(unsafe)
        with self.setting(spec, extra_env) as setting:
            if setting.tree is None:
                return self._refused(setting.refused or "unsafe tree", started)
            ran = Ran() if missing else self._run(spec, setting)
            return self._execution(spec, setting, setting.tree, ran, missing, started)

    def _execution(self, spec: SampleSpec, setting: SampleSetting,
                   tree: sample_tree.SampleTree, ran: Ran, missing: tuple[str, ...],
                   started: float) -> Execution:
        """The sample's record of what ran, as the oracle grades it."""
        program = program_of(spec.command)
        outputs, problem = ran.outputs, ran.layout_failed
        log = (f"bakeoff-rig: not on PATH in {self.image.tag}: {' '.join(missing)}\n"
               if missing else outputs.text("log"))
        return Execution(
            exit_code=ran.exit_code, log=log, duration_s=time.monotonic() - started,
            server=(outputs.text("server").strip() or "none") if spec.server else "none",
            server_log=outputs.text("server.log"), timed_out=ran.timed_out,
            oom_killed=ran.oom_killed, program_present=program is None or program not in missing,
            missing_tools=missing, image=self.image.tag, image_id=self.image.image_id,
            image_identity=self.image.identity,
            env={k: redact_url(v) if k == self.url_env else v for k, v in setting.env.items()},
            mounts=self.mounts_record(spec), limits=self.limits.as_record(),
            network=setting.network,
            db_schema=None if setting.schema is None else setting.schema.name,
            protected=tree.protected, files=outputs.collected(), canary=tree.canary,
            canary_results=(outputs.text("canary.jsonl") if tree.canary is not None
                            and tree.canary.runner == "pytest" and not problem else None),
            pinned=tree.pinned, truncated=int(outputs.text("log.truncated") or 0),
            infra_error=problem, layout_failed=problem is not None,
            stack=None if ran.stack is None else ran.stack.as_record(),
            stack_detail="" if ran.stack is None else ran.stack.detail,
            stack_log="" if ran.stack is None else ran.stack.log)

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
        tty = command is None
        argv = self.driver("shell" if tty else "exec", spec, setting,
                           None if command is None else sandbox.shell_join(command))
        container: Any = create_container(self.engine, self.container_spec(
            spec, setting, argv, purpose=f"a reproduction of {spec.sample}", tty=tty))
        try:
            database = "" if setting.schema is None else f", database {setting.schema.name}"
            say(f"{spec.sample}: {self.image.tag} ({self.image.image_id[:19]}), commit "
                f"{spec.commit[:12]}, network {setting.network}{database}; /work is a "
                "fresh copy: what you change here is discarded")
            flags = ["-a", "-i"] if tty else ["-a"]
            return subprocess.run([docker_cli, "start", *flags, container.id],
                                  check=False).returncode
        finally:
            with contextlib.suppress(docker.errors.NotFound):
                self.engine.call("remove the reproduction", container.remove, force=True,
                                 v=True)

    def mounts_record(self, spec: SampleSpec) -> tuple[Mapping[str, str], ...]:
        return ({"type": "tmpfs", "target": sandbox.WORKDIR,
                 "source": f"fresh tree of {spec.commit} from git objects"},
                {"type": "bind", "target": IN_DIR, "source": "the rig's inputs (read-only)"})

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
        env = {"HOME": HOME, "BAKEOFF_SAMPLE": spec.sample, "PYTHONSAFEPATH": "1",
               "PYTHONPYCACHEPREFIX": "/tmp/.bakeoff-pycache"}
        if tree is not None and tree.canary is not None:
            env.update(tree.canary.env())
        if schema is not None and self.url_env:
            env[self.url_env] = schema.url()
        env.update(extra_env or {})
        return env

    def _tree(self, spec: SampleSpec,
              inputs: Path) -> tuple[sample_tree.SampleTree | None, str | None]:
        """The sample's tree, written to `inputs`; (None, why) when it is unsafe."""
        try:
            tree = dict(self._checked(spec.commit))
            base = (self._checked(spec.base_commit)
                    if spec.protected or spec.harness == "base" else None)
        except UnsafeTreeError as error:
            return None, error.message
        built = sample_tree.build(spec, tree, base, spec.token)
        (inputs / "tree.tar").write_bytes(built.tar)
        (inputs / "root-owned").write_bytes(sample_tree.nul_list(built.root_owned))
        (inputs / "root-dirs").write_bytes(sample_tree.nul_list(built.root_dirs))
        (inputs / "collect").write_text("".join(f"{p}\n" for p in spec.collect))
        (inputs / "driver.sh").write_text(sample_driver.script())
        (inputs / "usercustomize.py").write_text(sample_driver.USERCUSTOMIZE)
        (inputs / "user-site").write_text(self.facts.user_site())
        canary = built.canary
        if canary is not None and canary.plugin:
            (inputs / "plugin").mkdir(mode=0o755)
            (inputs / "plugin" / f"{canary.plugin_module}.py").write_bytes(canary.plugin)
        for path in inputs.rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)
        return built, None

    def _checked(self, commit: str) -> Tree:
        with self.lock:
            if commit not in self.trees:
                self.trees[commit] = sample_tree.read_tree(
                    self.repo, commit, self.limits.disk_mb * 1024 * 1024)
            return self.trees[commit]

    def container_spec(self, spec: SampleSpec, setting: SampleSetting, command: list[str],
                       *, purpose: str, role: str = "sample", joins: str | None = None,
                       tty: bool = False) -> ContainerSpec:
        """A sample's container: the driver's user and capabilities, limits, labels,
        network, tmpfs mounts and the rig's inputs. `reproduce` re-creates a sample with
        exactly these. `joins`: the id of the sample's server container, whose network
        namespace the criterion shares."""
        disk = self.limits.disk_mb
        tmpfs = (*(Tmpfs(path, disk) for path in TMPFS_DIRS[1:]),
                 Tmpfs(sandbox.WORKDIR, disk, "0755"), Tmpfs(HOME, disk, "0755"),
                 Tmpfs(RUN_DIR, RUN_TMPFS_MB, "0700", executable=False),
                 *(Tmpfs(path, disk, "0755") for path in self.facts.writable_dirs()))
        return ContainerSpec(
            image=self.image.image_id, command=tuple(command), purpose=purpose,
            labels=self._labels(role, spec.arm), resources=self.limits.resources(),
            user=DRIVER_USER, cap_add=DRIVER_CAPS, tmpfs=tmpfs,
            mounts=(Bind(setting.inputs, IN_DIR),), joins=joins,
            network=NO_NETWORK if joins is not None else setting.network, env=setting.env,
            working_dir=sandbox.WORKDIR, tty=tty)

    def driver(self, mode: str, spec: SampleSpec, setting: SampleSetting,
               command: str | None = None, port: int | None = None) -> list[str]:
        """The container's command: the driver in `mode` (run | shell | exec | serve)."""
        canary = None if setting.tree is None else setting.tree.canary
        results = "" if canary is None or canary.runner != "pytest" else (
            f"{RESULTS_DIR.format(token=canary.token)}/{RESULTS_FILE}")
        argv = ["sh", f"{IN_DIR}/driver.sh", mode, sandbox.SANDBOX_USER,
                str(max(1, int(spec.timeout_s))), command or spec.command, results]
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
        run = self.stacks.start(spec, spec.stack, setting.inputs, setting.network,
                                self.limits)
        try:
            yield run
        finally:
            self.stacks.stop(run)

    def _run_sample(self, spec: SampleSpec, setting: SampleSetting) -> Ran:
        """The sample's container (and its server's, if any), run and removed."""
        port = random.randint(*SERVER_PORTS) if spec.server is not None else None
        server = None if port is None else self._server(spec, setting, port)
        container: Any = None
        try:
            container = create_container(self.engine, self.container_spec(
                spec, setting, self.driver("run", spec, setting, port=port),
                purpose=f"sample {spec.sample}", joins=None if server is None else server.id))
            ran = self._wait(spec, container)
            if server is not None:
                ran.outputs.files.update(self._server_outputs(server))
            return ran
        finally:
            for made in (container, server):
                if made is not None:
                    with contextlib.suppress(docker.errors.NotFound):
                        made.remove(force=True, v=True)

    def _wait(self, spec: SampleSpec, container: Any) -> Ran:
        began = time.monotonic()
        self.engine.call("start sample", container.start)
        deadline = spec.timeout_s + 5 + HOST_GRACE_S
        if spec.server is not None:
            deadline += spec.server.startup_timeout_s
        try:
            status = container.wait(timeout=deadline)
        except requests.exceptions.RequestException as error:
            raise SandboxUnavailableError(f"sample {spec.sample} did not stop although "
                                          "`timeout` should have ended it") from error
        elapsed = time.monotonic() - began
        container.reload()
        code = int(status.get("StatusCode", -1))
        oom = bool(container.attrs["State"].get("OOMKilled"))
        outputs = read_outputs(self.engine, container)
        if "ready" not in outputs.files and not oom:
            tail = container.logs(stdout=False, stderr=True, tail=20).decode(
                errors="replace").strip()
            return Ran(code, outputs, layout_failed=(
                f"the sample's tree could not be laid out (exit {code}): {tail}"))
        timed_out = code in sandbox.TIMEOUT_EXIT_CODES and elapsed >= spec.timeout_s - 0.5
        return Ran(code, outputs, timed_out, oom and not timed_out)

    def _server(self, spec: SampleSpec, setting: SampleSetting, port: int) -> Any:
        """The sample's server, started in a container of its own (its own tree, HOME and
        /tmp): the criterion's container shares only its network namespace."""
        server: Any = create_container(self.engine, self.container_spec(
            spec, setting, self.driver("serve", spec, setting, port=port),
            purpose=f"the server of {spec.sample}", role="sample-server"))
        try:
            self.engine.call("start the server", server.start)
        except BaseException:
            with contextlib.suppress(docker.errors.NotFound):
                server.remove(force=True, v=True)
            raise
        return server

    def _server_outputs(self, server: Any) -> dict[str, bytes]:
        """The server's log, once its driver was told to stop (it keeps head and tail)."""
        with contextlib.suppress(docker.errors.APIError):
            self.engine.call("stop the server", server.stop, timeout=10)
        found = read_outputs(self.engine, server).files
        return {"server.log": found.get("server.log", b"")}


def read_outputs(engine: Engine, container: Any) -> Outputs:
    """The driver's output directory, from the one line it writes to its stdout (the
    container's log: nothing of the sample's command can write there)."""
    raw = engine.call("read the sample's outputs", container.logs, stdout=True, stderr=False)
    return parse_outputs(bytes(raw))
