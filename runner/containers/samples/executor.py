"""The docker `SampleExecutor`: each sample in a FRESH container, from a fresh copy of the
commit's tree (from git objects, never a live checkout), with the rig's layer on top, a
fresh empty database, the network off (only the database is reachable), then removed.
Nothing of a sample touches the host's disk but the rig's own inputs.

The executor ties the package's two halves: the sample's setting
(`runner.containers.samples.setting`: its inputs, tree, network, database and env) and
its containers (`runner.containers.samples.container`: the driver's container, its
server, its stack, a browser criterion's browser, and what they came to); it composes
what the image allows (`runner.containers.images.facts.ImageFacts`: missing tools,
writable paths, the user site) and where samples reach their database
(`runner.containers.samples.network.SampleNetworks`), and turns what ran into the
`Execution` the oracle grades.
"""

from __future__ import annotations

import contextlib
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType

from rig import headroom
from rig.preflight import program_of
from rig.sample.spec import Execution, SampleSpec
from rig.sample.tree import Caps, Entry
from runner.containers import browser, database, sandbox
from runner.containers.backend import LABEL_EXPERIMENT, LABEL_RUN, ContainerEngine, Labels
from runner.containers.images import BuiltImage
from runner.containers.images.facts import ImageFacts
from runner.containers.samples.container import (
    SERVER_CGROUP,
    ContainerResult,
    SampleContainers,
    ran_as,
)
from runner.containers.samples.network import SampleNetworks
from runner.containers.samples.setting import IN_DIR, SampleSetting, SettingMaker, observed
from runner.containers.samples.tree import SampleTree, Trees
from runner.containers.stacks import Stacks
from runner.errors import (
    ComposeError,
    DatabaseError,
    EngineError,
    EngineFailedError,
    EngineUnreachableError,
    InfraError,
    SandboxUnavailableError,
)

# How long a database failure waits to see its server stop (an outage under way) before
# it is graded: docker stops a container within 10 s (SIGTERM, then SIGKILL).
STOP_GRACE_S = 12.0


def redact_url(url: str) -> str:
    """postgresql://role:secret@host -> postgresql://role:***@host."""
    head, at, tail = url.partition("@")
    if not at or ":" not in head.split("//", 1)[-1]:
        return url
    scheme_user, _, _ = head.rpartition(":")
    return f"{scheme_user}:***@{tail}"


class DockerSampleExecutor:
    """Runs samples for one experiment; owns its sample networks (and Postgres, if any)."""

    def __init__(self, engine: ContainerEngine, repo: Path, experiment: str, image: BuiltImage,
                 limits: sandbox.SandboxLimits, url_env: str | None = None,
                 db_image: BuiltImage | None = None,
                 shared_db: database.DbServer | None = None,
                 db_policy: database.DbPolicy | None = None) -> None:
        self.engine, self.repo, self.experiment = engine, repo, experiment
        self.image, self.limits = image, limits
        self.run = secrets.token_hex(3)
        self.networks = SampleNetworks(engine, experiment, self.run, db_image, shared_db,
                                       db_policy)
        self.stacks = Stacks(engine, experiment, self.run)
        self.facts = ImageFacts(engine, repo, experiment, image,
                                Labels(experiment, "tool-check", run=self.run))
        self.scratch = Path(tempfile.mkdtemp(prefix=f"bakeoff-{experiment}-samples-"))
        self.scratch.chmod(0o755)
        self.trees = Trees(repo, Caps(limits.max_files, limits.disk_mb * 1024 * 1024))
        self.settings = SettingMaker(repo, limits, url_env, self.networks, self.facts,
                                     self.trees, self.scratch)
        self.containers = SampleContainers(engine, experiment, self.run, image, limits,
                                           self.facts, self.stacks)

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
            with self.settings.setting(spec, extra_env) as setting:
                if setting.tree is None:
                    return self._refused(setting.refused or "unsafe tree", started)
                ran = ContainerResult() if missing else self.containers.run_sample(spec, setting)
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
                   tree: SampleTree, ran: ContainerResult, missing: tuple[str, ...],
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
            image_ref=ran_as(self.engine, self.image.image_id),
            env={k: redact_url(v) if k in setting.secrets else v for k, v in setting.env.items()},
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
        with self.settings.setting(spec, extra_env) as setting:
            if setting.tree is None:
                raise InfraError(f"sample {spec.sample}: its tree is unsafe to lay out: "
                                 f"{setting.refused}", hint="read the record's detail")
            with (self.containers.stack_up(spec, setting) if spec.stack is not None
                  else contextlib.nullcontext(None)) as run:
                if run is not None:
                    say(f"{spec.sample}: stack {run.project} "
                        f"{'healthy' if run.healthy else 'never got healthy: ' + run.detail}")
                return self.containers.attached(spec, setting, command, say, docker_cli)


    def mounts_record(self, spec: SampleSpec) -> tuple[Mapping[str, str], ...]:
        return ({"type": "tmpfs", "target": sandbox.WORKDIR,
                 "source": f"fresh tree of {spec.commit} from git objects"},
                {"type": "stdin", "target": IN_DIR,
                 "source": "the rig's inputs, streamed through the engine (read-only)"})

    def checked_tree(self, commit: str) -> Mapping[str, Entry]:
        """`commit`'s tree as its samples read it, checked (`UnsafeTreeError`); shared,
        never to be changed."""
        return self.trees.checked(commit)



def _program(spec: SampleSpec) -> str | None:
    """The program the sample's command starts in its image (a browser criterion's is the
    rig's pytest, in the browser's image)."""
    return None if spec.browser is not None else program_of(spec.command)

