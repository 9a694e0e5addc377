"""The docker `SampleExecutor`: each sample in a FRESH container, from a fresh copy of the
commit's tree (from git objects, never a live checkout), with the rig's layer on top
(`runner.sample_tree`: the base's harness and protected files, no bytecode, canaries),
a fresh empty database, the network off (only the database is reachable), then removed.

The container runs `runner.sample_driver` as root with three capabilities (CHOWN, SETUID,
SETGID); it lays the tree out in a size-limited tmpfs, makes the files the code under
test must not change root-owned, runs the command as the sandbox user with none, kills
whatever the command left, and writes the output's head and tail (and the files the rig
reads back) where only it can write. Nothing of a sample touches the host's disk but
the rig's own inputs.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import random
import secrets
import shutil
import subprocess
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import docker.errors
import requests
from docker.types import Mount

from rig.canary import RESULTS_DIR, RESULTS_FILE
from rig.oracle import Execution, SampleSpec
from rig.preflight import program_of
from rig.tree import Tree, UnsafeTreeError
from runner.containers import database, sample_driver, sample_tree, sandbox
from runner.containers.engine import Engine, Labels
from runner.containers.images import BuiltImage
from runner.errors import DatabaseError, InfraError, SandboxUnavailableError
from runner.store.files import experiment_dir, write_json

# Which tools are not on PATH, checked once per image in a container of its own, never
# in-band: output the code under test printed could imitate an in-band signal.
TOOL_CHECK = 'for x in "$@"; do command -v "$x" >/dev/null 2>&1 || echo "$x"; done'
# What the sandbox user could write outside the sample's tmpfs mounts: must be nothing
# (else the code under test could fill the host's disk through the container's layer).
TMPFS_DIRS = ("/work", "/tmp", "/var/tmp", "/run/lock")
WRITABLE_CHECK = ('find / -xdev \\( -path /proc -o -path /sys -o -path /dev -o -path /work '
                  '-o -path /tmp -o -path /var/tmp -o -path /run/lock -o -path "$HOME" \\) '
                  "-prune -o ! -type l -writable -printf '%y %p\\n' 2>/dev/null; true")
HOME = "/home/agent"
USER_SITE_CHECK = ("command -v python3 >/dev/null 2>&1 && cd / && "
                   "python3 -I -c 'import site; print(site.getusersitepackages())' || true")
IN_DIR, OUT_DIR, RUN_DIR = sample_driver.IN, sample_driver.OUT, sample_driver.RUN
RUN_TMPFS_MB = 256  # the command's whole output, before the rig keeps its head and tail
HOST_GRACE_S = 60
SERVER_PORTS = (20000, 60000)


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


@dataclass
class Outputs:
    """What the driver left in /var/lib/bakeoff/out, as read back through the engine."""

    files: dict[str, bytes] = field(default_factory=dict)

    def text(self, name: str) -> str:
        return self.files.get(name, b"").decode(errors="replace")

    def collected(self) -> dict[str, str]:
        found = {}
        for name, data in self.files.items():
            if name.startswith("files/") and name.endswith(".path"):
                content = self.files.get(name.removesuffix(".path"))
                if content is not None and len(content) <= sample_driver.FILE_LIMIT:
                    found[data.decode(errors="replace").rstrip("\n")] = content.decode(
                        errors="replace")
        return found


class DockerSampleExecutor:
    """Runs samples for one experiment; owns its sample networks (and Postgres, if any)."""

    def __init__(self, engine: Engine, repo: Path, experiment: str, image: BuiltImage,
                 limits: sandbox.SandboxLimits, url_env: str | None = None,
                 db_image: BuiltImage | None = None,
                 shared_db: database.DbServer | None = None,
                 db_policy: database.DbPolicy | None = None) -> None:
        self.engine, self.repo, self.experiment = engine, repo, experiment
        self.image, self.limits, self.url_env, self.db_image = image, limits, url_env, db_image
        self.db_policy = db_policy or database.DbPolicy()
        self.run = secrets.token_hex(3)
        # The experiment's own Postgres when it is up (saves a start per executor): samples
        # still get fresh databases; we only attach it to our sample networks and detach it.
        self.server: database.DbServer | None = shared_db
        self.shared = shared_db is not None
        self.networks: dict[str, str] = {}
        self.lock = threading.Lock()
        self.scratch = Path(tempfile.mkdtemp(prefix=f"bakeoff-{experiment}-samples-"))
        self.scratch.chmod(0o755)
        self.tool_cache: dict[tuple[str, ...], tuple[str, ...]] = {}
        self.trees: dict[str, Tree] = {}  # commit -> its checked tree (bases are reused)

    def __enter__(self) -> DockerSampleExecutor:
        self.setup()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.teardown()

    def setup(self) -> None:
        """Before the first sample: the executor's own Postgres, when none is shared."""
        if self.db_image is not None and not self.shared:
            net = sandbox.network_name(self.experiment, "scoredb", self.run)
            sandbox.create_network(self.engine, net, self._labels("score-network"), egress=True)
            self.server = database.start_server(
                self.engine, self.db_image.image_id, self._labels("score-database"), net,
                f"bakeoff-{self.experiment}-scoredb-{self.run}", policy=self.db_policy)
            database.lock_down(self.server)

    def teardown(self) -> None:
        """After the last sample: every network, container and file it made is gone."""
        shutil.rmtree(self.scratch, ignore_errors=True)
        if self.shared and self.server is not None:
            for name in self.networks.values():
                with contextlib.suppress(docker.errors.DockerException):
                    self.engine.client.networks.get(name).disconnect(
                        self.server.container_id, force=True)
        self.engine.remove_labelled({"io.bakeoff.experiment": self.experiment,
                                     "io.bakeoff.run": self.run})

    def _labels(self, role: str, arm: str = "") -> Labels:
        return Labels(self.experiment, role, arm, self.run)

    def _network(self, arm: str) -> str:
        """The arm's sample network: internal, bridge without a host address, db attached."""
        with self.lock:
            if arm in self.networks:
                return self.networks[arm]
            name = sandbox.network_name(self.experiment, f"{arm}-samples", self.run)
            sandbox.create_network(self.engine, name, self._labels("sample-network", arm),
                                   egress=False)
            if self.server is not None:
                net = self.engine.client.networks.get(name)
                self.engine.call("connect db", net.connect, self.server.container_id,
                                 aliases=[database.DB_ALIAS])
                self.server = database.refresh_port(self.engine, self.server)
            self.networks[arm] = name
            return name

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
                requests.exceptions.RequestException, DatabaseError) as error:
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
        missing = self.missing_tools((*spec.requires, *([program] if program else [])))
        unsafe = self.unsafe_image()
        if unsafe is not None:
            raise SandboxUnavailableError(unsafe)
        with self.setting(spec, extra_env) as setting:
            if setting.tree is None:
                return self._refused(setting.refused or "unsafe tree", started)
            code, outputs, timed_out, oom, problem = None, Outputs(), False, False, None
            log = ""
            if missing:
                log = f"bakeoff-rig: not on PATH in {self.image.tag}: {' '.join(missing)}\n"
            else:
                code, outputs, timed_out, oom, problem = self._run(spec, setting)
                log = outputs.text("log")
            tree = setting.tree
            return Execution(
                exit_code=code, log=log, duration_s=time.monotonic() - started,
                server=(outputs.text("server").strip() or "none") if spec.server else "none",
                server_log=outputs.text("server.log"), timed_out=timed_out, oom_killed=oom,
                program_present=program is None or program not in missing,
                missing_tools=missing, image=self.image.tag, image_id=self.image.image_id,
                image_identity=self.image.identity,
                env={k: redact_url(v) if k == self.url_env else v
                     for k, v in setting.env.items()},
                mounts=self.mounts_record(spec), limits=self.limits.as_record(),
                network=setting.network,
                db_schema=None if setting.schema is None else setting.schema.name,
                protected=tree.protected, files=outputs.collected(), canary=tree.canary,
                canary_results=(outputs.text("canary.jsonl") if tree.canary is not None
                                and tree.canary.runner == "pytest" and not problem else None),
                pinned=tree.pinned, truncated=int(outputs.text("log.truncated") or 0),
                infra_error=problem, layout_failed=problem is not None)

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
            tty = command is None
            argv = self.driver("shell" if tty else "exec", spec, setting,
                               None if command is None else sandbox.shell_join(command))
            container: Any = self.engine.call(
                f"create a reproduction of {spec.sample}", self.engine.client.containers.create,
                self.image.image_id, argv, tty=tty, stdin_open=tty,
                **self.container_kwargs(spec.arm, setting))
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
        tree, refused = self._tree(spec, inputs)
        network = self._network(spec.arm) if self.server is not None else "none"
        schema = None
        if self.server is not None and tree is not None:
            with self.lock:
                owner = f"s{secrets.token_hex(4)}"
                schema = database.create_schema(
                    self.server, database.role_name(self.experiment, owner))
        env = {"HOME": HOME, "BAKEOFF_SAMPLE": spec.sample, "PYTHONSAFEPATH": "1",
               "PYTHONPYCACHEPREFIX": "/tmp/.bakeoff-pycache"}
        if tree is not None and tree.canary is not None:
            env.update(tree.canary.env())
        if schema is not None and self.url_env:
            env[self.url_env] = schema.url()
        env.update(extra_env or {})
        try:
            yield SampleSetting(inputs, env, network, schema, tree, refused)
        finally:
            shutil.rmtree(inputs, ignore_errors=True)
            if schema is not None and self.server is not None:
                # Under the same lock as create (the database module serializes admin DDL
                # across executors too).
                with self.lock:
                    database.drop_schema(self.server, schema.name)

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
        (inputs / "user-site").write_text(self.user_site())
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

    def container_kwargs(self, arm: str, setting: SampleSetting, *, role: str = "sample",
                         joins: str | None = None) -> dict[str, Any]:
        """How a sample container is created (image and command aside): the driver's user
        and capabilities, limits, labels, network, tmpfs mounts and the rig's inputs.
        `reproduce` re-creates a sample with exactly these. `joins`: the id of the
        sample's server container, whose network namespace the criterion shares."""
        memory = f"{self.limits.memory_mb}m"
        disk = f"size={self.limits.disk_mb}m,exec"
        tmpfs = {**{path: f"{disk},mode=1777" for path in TMPFS_DIRS[1:]},
                 sandbox.WORKDIR: f"{disk},mode=0755", HOME: f"{disk},mode=0755",
                 RUN_DIR: f"size={RUN_TMPFS_MB}m,mode=0700",
                 **{path: f"{disk},mode=0755" for path in self.writable_dirs()}}
        net: dict[str, Any] = {"network_mode": "none"} if setting.network == "none" else {
            "network": setting.network}
        if joins is not None:
            net = {"network_mode": f"container:{joins}"}
        return dict(
            user="0:0", working_dir=sandbox.WORKDIR, environment=dict(setting.env),
            labels=self._labels(role, arm).as_dict(), cap_drop=["ALL"],
            cap_add=["CHOWN", "SETUID", "SETGID"], security_opt=["no-new-privileges"],
            nano_cpus=int(self.limits.cpus * 1e9), mem_limit=memory, memswap_limit=memory,
            pids_limit=self.limits.pids, init=True, tmpfs=tmpfs,
            mounts=[Mount(IN_DIR, str(setting.inputs), type="bind", read_only=True)],
            **net)

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

    def _run(self, spec: SampleSpec, setting: SampleSetting
             ) -> tuple[int | None, Outputs, bool, bool, str | None]:
        """(exit code, outputs, timed out, OOM-killed, why the layout failed)."""
        port = random.randint(*SERVER_PORTS) if spec.server is not None else None
        server = None if port is None else self._server(spec, setting, port)
        container: Any = None
        try:
            container = self.engine.call(
                f"create sample {spec.sample}", self.engine.client.containers.create,
                self.image.image_id, self.driver("run", spec, setting, port=port),
                **self.container_kwargs(spec.arm, setting,
                                        joins=None if server is None else server.id))
            code, outputs, timed_out, oom, problem = self._wait(spec, container)
            if server is not None:
                outputs.files.update(self._server_outputs(server))
            return code, outputs, timed_out, oom, problem
        finally:
            for made in (container, server):
                if made is not None:
                    with contextlib.suppress(docker.errors.NotFound):
                        made.remove(force=True, v=True)

    def _wait(self, spec: SampleSpec, container: Any
              ) -> tuple[int | None, Outputs, bool, bool, str | None]:
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
            return code, outputs, False, False, (
                f"the sample's tree could not be laid out (exit {code}): {tail}")
        timed_out = code in sandbox.TIMEOUT_EXIT_CODES and elapsed >= spec.timeout_s - 0.5
        return code, outputs, timed_out, oom and not timed_out, None

    def _server(self, spec: SampleSpec, setting: SampleSetting, port: int) -> Any:
        """The sample's server, started in a container of its own (its own tree, HOME and
        /tmp): the criterion's container shares only its network namespace."""
        server: Any = self.engine.call(
            f"create the server of {spec.sample}", self.engine.client.containers.create,
            self.image.image_id, self.driver("serve", spec, setting, port=port),
            **self.container_kwargs(spec.arm, setting, role="sample-server"))
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

    # -- what the image allows -----------------------------------------------------------

    def missing_tools(self, tools: tuple[str, ...]) -> tuple[str, ...]:
        """The tools not on PATH in this executor's image (checked once per tool set).

        An image ID names fixed content, so the answer is kept on disk per image ID
        (`.bakeoff/<experiment>/tools/`) and later executors skip the check container.
        """
        wanted = tuple(dict.fromkeys(tools))
        with self.lock:
            if wanted not in self.tool_cache:
                self.tool_cache[wanted] = tuple(self._cached(
                    "missing", wanted, lambda: tools_missing(
                        self.engine, self.image.image_id, wanted,
                        self._labels("tool-check"))))
            return self.tool_cache[wanted]

    def writable(self) -> tuple[str, ...]:
        """`writable` of this executor's image (checked once per image)."""
        with self.lock:
            key = ("@writable",)
            if key not in self.tool_cache:
                self.tool_cache[key] = tuple(self._cached("writable", (), lambda: writable(
                    self.engine, self.image.image_id, self._labels("tool-check"))))
            return self.tool_cache[key]

    def user_site(self) -> str:
        """The sandbox user's site directory of the image's python3 ("" without one),
        asked once per image: every python sample's driver makes it the rig's."""
        with self.lock:
            key = ("@user-site",)
            if key not in self.tool_cache:
                self.tool_cache[key] = tuple(self._cached("site", (), lambda: [_check(
                    self.engine, self.image.image_id, ["sh", "-c", USER_SITE_CHECK],
                    self._labels("tool-check"), env={"HOME": HOME}).strip()]))
            return self.tool_cache[key][0]

    def writable_dirs(self) -> list[str]:
        """Directories outside the standard tmpfs mounts the sandbox user could write in
        this image: each gets a tmpfs too."""
        return [item[2:] for item in self.writable() if item.startswith("d ")]

    def unsafe_image(self) -> str | None:
        """Why the image cannot hold a sample: files the sandbox user could grow."""
        files = [item[2:] for item in self.writable() if not item.startswith("d ")]
        if not files:
            return None
        return (f"image {self.image.tag} lets the sandbox user write {', '.join(files[:5])} "
                "outside the rig's size-limited mounts (fix: make them root-owned in the "
                "image)")

    def _cached(self, what: str, wanted: tuple[str, ...],
                compute: Any) -> list[str]:
        key = hashlib.sha256("\0".join([what, self.image.image_id, *wanted]).encode())
        path = (experiment_dir(self.repo, self.experiment) / "tools"
                / f"{key.hexdigest()[:24]}.json")
        if path.exists():
            return list(json.loads(path.read_text(encoding="utf-8"))[what])
        found = list(compute())
        write_json(path, {"image_id": self.image.image_id, "tools": list(wanted), what: found})
        return found


def read_outputs(engine: Engine, container: Any) -> Outputs:
    """The driver's output directory, from the one line it writes to its stdout (the
    container's log: nothing of the sample's command can write there). Every file in it
    is bounded by the driver, so reading it whole is bounded too."""
    raw = engine.call("read the sample's outputs", container.logs, stdout=True, stderr=False)
    line = next((line for line in reversed(bytes(raw).splitlines())
                 if line.startswith(sample_driver.MARK)), None)
    if line is None:
        return Outputs()
    try:
        data = base64.b64decode(line[len(sample_driver.MARK):], validate=True)
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            return Outputs({member.name.removeprefix("./"): handle.read()
                            for member in tar.getmembers() if member.isfile()
                            and (handle := tar.extractfile(member)) is not None})
    except (ValueError, tarfile.TarError):
        return Outputs()


def tools_missing(engine: Engine, image_id: str, tools: tuple[str, ...],
                  labels: Labels) -> tuple[str, ...]:
    """Run `command -v` for each tool in a throwaway container of the image (no network)."""
    if not tools:
        return ()
    output = _check(engine, image_id, ["sh", "-c", TOOL_CHECK, "bakeoff-tools", *tools],
                    labels)
    found = set(output.split())
    return tuple(t for t in tools if t in found)


def writable(engine: Engine, image_id: str, labels: Labels) -> list[str]:
    """The top-level paths the sandbox user can write outside the standard tmpfs mounts,
    `d /path` for a directory (it gets a tmpfs), `f /path` for anything else (a file no
    tmpfs can cover: the image is refused)."""
    output = _check(engine, image_id, ["sh", "-c", WRITABLE_CHECK], labels,
                    env={"HOME": HOME})
    found = sorted((line[2:], line[0]) for line in output.splitlines() if line[2:3] == "/")
    dirs = [p for p, kind in found if kind == "d"]
    return [f"{'d' if kind == 'd' else 'f'} {p}" for p, kind in found
            if not any(p.startswith(q + "/") for q in dirs)]


def _check(engine: Engine, image_id: str, command: list[str], labels: Labels,
           env: Mapping[str, str] | None = None) -> str:
    output = engine.call(
        "check the image", engine.client.containers.run, image_id, command, remove=True,
        network_mode="none", labels=labels.as_dict(), user=sandbox.SANDBOX_USER,
        environment=dict(env or {}), stdout=True, stderr=False, cap_drop=["ALL"],
        security_opt=["no-new-privileges"])
    return bytes(output).decode(errors="replace")

