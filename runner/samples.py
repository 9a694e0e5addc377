"""The docker `SampleExecutor`: each sample in a FRESH container, from a fresh copy of the
commit's tree (from git, never a live checkout), protected files restored from the base,
a fresh empty schema, the network off (only the database is reachable), then removed.

The fresh copy is a `git archive` extracted into a scratch directory of its own and
bind-mounted at /work (a `put_archive` into the container cost ~80 ms a sample; the
bind mount costs nothing and scales with the tree), deleted after the sample. A prepared
image (toolchain `setup` baked in) may hold what setup generated in /work (node_modules,
*.egg-info): a mount would hide it, so there the tree is copied in over it instead.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import posixpath
import secrets
import shutil
import subprocess
import tarfile
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import docker.errors
import requests
from docker.types import Mount

from rig.oracle import Execution, SampleSpec
from rig.preflight import program_of
from runner import database, prepared, sample_server, sandbox, workspace
from runner.engine import Engine, Labels
from runner.errors import DatabaseError, SandboxUnavailableError
from runner.images import BuiltImage
from runner.store import experiment_dir, write_json

# Run inside the sample container: the command under `timeout`, stderr merged into stdout
# IN ORDER (cargo prints `Running <binary>` on stderr and its `running N tests` on stdout:
# two docker streams interleave by arrival, not by order).
DRIVER = 't="$1"; c="$2"; exec timeout -k 5 "$t" sh -c "$c" 2>&1'
# Which tools are not on PATH, checked once per image in a container of its own, never
# in-band: output the code under test printed could imitate an in-band signal.
TOOL_CHECK = 'for x in "$@"; do command -v "$x" >/dev/null 2>&1 || echo "$x"; done'
TOOL_CHECK_TIMEOUT_S = 60
HOST_GRACE_S = 60
COLLECT_LIMIT = 32 * 1024 * 1024  # a coverage.py JSON of a large project is a few MiB


def tree_archive(repo: Path, commit: str, base: str,
                 protected: tuple[str, ...]) -> tuple[bytes, dict[str, str]]:
    """A tar of `commit` under work/, owned by the sandbox user, with each protected path
    replaced by the base's version (removed when the base has none)."""
    raw = subprocess.run(["git", "archive", "--format=tar", "--prefix=work/", commit],
                         cwd=repo, capture_output=True, check=True, timeout=120).stdout
    restored = {p: workspace.file_at(repo, base, p) for p in protected}
    out = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(raw)) as src, tarfile.open(fileobj=out, mode="w") as dst:
        for member in src.getmembers():
            if member.name.removeprefix("work/") in restored:
                continue
            member.uid, member.gid = workspace.SANDBOX_UID, workspace.SANDBOX_GID
            member.uname = member.gname = ""
            dst.addfile(member, src.extractfile(member) if member.isfile() else None)
        hashes: dict[str, str] = {}
        for path, content in sorted(restored.items()):
            if content is None:
                hashes[path] = "absent"
                continue
            info = tarfile.TarInfo(f"work/{path}")
            info.size, info.mode = len(content), 0o644
            info.uid, info.gid = workspace.SANDBOX_UID, workspace.SANDBOX_GID
            dst.addfile(info, io.BytesIO(content))
            hashes[path] = hashlib.sha256(content).hexdigest()
    return out.getvalue(), hashes


@dataclass(frozen=True)
class SampleSetting:
    """Where one sample runs: its fresh tree, network, schema, env and restored files."""

    tree: Path
    env: dict[str, str]
    network: str
    schema: database.DbSchema | None
    protected: dict[str, str]  # path -> sha256 (or "absent") restored from the base


def redact_url(url: str) -> str:
    """postgresql://role:secret@host -> postgresql://role:***@host."""
    head, at, tail = url.partition("@")
    if not at or ":" not in head.split("//", 1)[-1]:
        return url
    scheme_user, _, _ = head.rpartition(":")
    return f"{scheme_user}:***@{tail}"


class DockerSampleExecutor:
    """Runs samples for one experiment; owns its sample networks (and Postgres, if any)."""

    def __init__(self, engine: Engine, repo: Path, experiment: str, image: BuiltImage,
                 limits: sandbox.SandboxLimits, url_env: str | None = None,
                 db_image: BuiltImage | None = None,
                 shared_db: database.DbServer | None = None) -> None:
        self.engine, self.repo, self.experiment = engine, repo, experiment
        self.image, self.limits, self.url_env, self.db_image = image, limits, url_env, db_image
        self.run = secrets.token_hex(3)
        # The experiment's own Postgres when it is up (saves a start per executor): samples
        # still get fresh schemas; we only attach it to our sample networks and detach it.
        self.server: database.DbServer | None = shared_db
        self.shared = shared_db is not None
        self.networks: dict[str, str] = {}
        self.lock = threading.Lock()
        self.scratch = Path(tempfile.mkdtemp(prefix=f"bakeoff-{experiment}-samples-"))
        self.copy_tree = image.name == prepared.PREPARED
        self.tool_cache: dict[tuple[str, ...], tuple[str, ...]] = {}
        self.marks: dict[str, str] = {}  # sample -> the marker of its server's output
        self.files: dict[str, dict[str, str]] = {}  # sample -> `spec.collect` as read back

    def __enter__(self) -> DockerSampleExecutor:
        if self.db_image is not None and not self.shared:
            net = sandbox.network_name(self.experiment, "scoredb", self.run)
            sandbox.create_network(self.engine, net, self._labels("score-network"), egress=True)
            self.server = database.start_server(
                self.engine, self.db_image.image_id, self._labels("score-database"), net,
                f"bakeoff-{self.experiment}-scoredb-{self.run}")
            database.lock_down(self.server)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
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

    def execute(self, spec: SampleSpec,
                extra_env: Mapping[str, str] | None = None) -> Execution:
        """One sample in a fresh container. `extra_env` (reproduce: the recorded env, its
        secrets re-read from the environment) is laid over the sample's own env."""
        started = time.monotonic()
        try:
            return self._execute(spec, started, extra_env)
        except (SandboxUnavailableError, docker.errors.APIError,
                requests.exceptions.RequestException, DatabaseError) as error:
            return Execution(exit_code=None, log="", duration_s=time.monotonic() - started,
                             infra_error=f"the rig failed: {error}", image=self.image.tag,
                             image_id=self.image.image_id,
                             image_identity=self.image.identity)

    def _execute(self, spec: SampleSpec, started: float,
                 extra_env: Mapping[str, str] | None = None) -> Execution:
        with self.setting(spec, extra_env) as setting:
            program = program_of(spec.command)
            missing = self.missing_tools((*spec.requires, *([program] if program else [])))
            code, log, timed_out, oom = None, "", False, False
            if missing:
                log = f"bakeoff-rig: not on PATH in {self.image.tag}: {' '.join(missing)}\n"
            else:
                code, log, timed_out, oom = self._run(spec, setting.tree, setting.env,
                                                      setting.network)
        server, server_log = "none", ""
        if spec.server is not None and spec.sample in self.marks:
            log, server, server_log = sample_server.split(log, self.marks.pop(spec.sample))
        return Execution(
            exit_code=code, log=log, duration_s=time.monotonic() - started,
            server=server, server_log=server_log,
            timed_out=timed_out, oom_killed=oom,
            program_present=program is None or program not in missing,
            missing_tools=missing,
            image=self.image.tag, image_id=self.image.image_id,
            image_identity=self.image.identity,
            env={k: redact_url(v) if k == self.url_env else v for k, v in setting.env.items()},
            mounts=({"type": "bind", "target": sandbox.WORKDIR,
                     "source": f"fresh git archive of {spec.commit}"},),
            limits=self.limits.as_record(), network=setting.network,
            db_schema=None if setting.schema is None else setting.schema.name,
            protected=setting.protected, files=self.files.pop(spec.sample, {}))

    @contextlib.contextmanager
    def setting(self, spec: SampleSpec,
                extra_env: Mapping[str, str] | None = None) -> Iterator[SampleSetting]:
        """A sample's fresh tree, network, schema and env; all gone when the block ends."""
        archive, protected = tree_archive(self.repo, spec.commit, spec.base_commit,
                                          spec.protected)
        tree = self._extract(archive)
        network = self._network(spec.arm) if self.server is not None else "none"
        schema = None
        if self.server is not None:
            with self.lock:
                owner = f"s{secrets.token_hex(4)}"
                schema = database.create_schema(
                    self.server, database.role_name(self.experiment, owner))
        env = {"HOME": "/home/agent", "BAKEOFF_SAMPLE": spec.sample}
        if schema is not None and self.url_env:
            env[self.url_env] = schema.url()
        env.update(extra_env or {})
        try:
            yield SampleSetting(tree, env, network, schema, protected)
        finally:
            shutil.rmtree(tree.parent, ignore_errors=True)
            if schema is not None and self.server is not None:
                # Under the same lock as create: both rewrite the database's ACL
                # (GRANT CONNECT / DROP OWNED BY), and Postgres refuses concurrent updates
                # of one catalog row ("tuple concurrently updated").
                with self.lock:
                    database.drop_schema(self.server, schema.name)

    def _extract(self, archive: bytes) -> Path:
        """A fresh directory holding the tree (as work/), owned by the sandbox user."""
        scratch = Path(tempfile.mkdtemp(prefix="sample-", dir=self.scratch))
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(scratch, filter="fully_trusted")  # our own git archive
        tree = scratch / "work"
        tree.mkdir(exist_ok=True)
        workspace.give_to_sandbox(tree)
        return tree

    def missing_tools(self, tools: tuple[str, ...]) -> tuple[str, ...]:
        """The tools not on PATH in this executor's image (checked once per tool set).

        An image ID names fixed content, so the answer is kept on disk per image ID
        (`.bakeoff/<experiment>/tools/`) and later executors skip the check container.
        """
        wanted = tuple(dict.fromkeys(tools))
        with self.lock:
            if wanted not in self.tool_cache:
                self.tool_cache[wanted] = self._tools_on_disk(wanted)
            return self.tool_cache[wanted]

    def _tools_on_disk(self, wanted: tuple[str, ...]) -> tuple[str, ...]:
        key = hashlib.sha256("\0".join([self.image.image_id, *wanted]).encode()).hexdigest()
        path = experiment_dir(self.repo, self.experiment) / "tools" / f"{key[:24]}.json"
        if path.exists():
            return tuple(json.loads(path.read_text(encoding="utf-8"))["missing"])
        missing = tools_missing(self.engine, self.image.image_id, wanted,
                                self._labels("tool-check"))
        write_json(path, {"image_id": self.image.image_id, "tools": list(wanted),
                          "missing": list(missing)})
        return missing

    def container_kwargs(self, arm: str, tree: Path, env: Mapping[str, str],
                         network: str) -> dict[str, Any]:
        """How a sample container is created (image aside): user, limits, labels, network,
        the tree's mount. `reproduce` re-creates a sample with exactly these."""
        memory = f"{self.limits.memory_mb}m"
        net: dict[str, Any] = {"network_mode": "none"} if network == "none" else {
            "network": network}
        return dict(
            user=workspace.sandbox_user(), working_dir=sandbox.WORKDIR, environment=dict(env),
            labels=self._labels("sample", arm).as_dict(), cap_drop=["ALL"],
            security_opt=["no-new-privileges"], nano_cpus=int(self.limits.cpus * 1e9),
            mem_limit=memory, memswap_limit=memory, pids_limit=self.limits.pids, init=True,
            mounts=[] if self.copy_tree else [Mount(sandbox.WORKDIR, str(tree), type="bind")],
            **net)

    def load_tree(self, container: Any, tree: Path) -> None:
        """A prepared image keeps what setup generated in /work: copy the tree over it."""
        if self.copy_tree:
            self.engine.call("copy tree", container.put_archive, "/", _tar_of(tree))

    def _run(self, spec: SampleSpec, tree: Path, env: dict[str, str],
             network: str) -> tuple[int | None, str, bool, bool]:
        command = ["sh", "-c", DRIVER, "bakeoff-rig", str(max(1, int(spec.timeout_s))),
                   spec.command]
        if spec.server is not None:
            command, self.marks[spec.sample] = sample_server.argv(
                spec.server, spec.command, spec.timeout_s)
        container: Any = self.engine.call(
            f"create sample {spec.sample}", self.engine.client.containers.create,
            self.image.image_id, command,
            **self.container_kwargs(spec.arm, tree, env, network))
        try:
            self.load_tree(container, tree)
            began = time.monotonic()
            self.engine.call("start sample", container.start)
            try:
                status = container.wait(timeout=spec.timeout_s + 5 + HOST_GRACE_S)
            except requests.exceptions.RequestException as error:
                raise SandboxUnavailableError(f"sample {spec.sample} did not stop although "
                                              "`timeout` should have ended it") from error
            elapsed = time.monotonic() - began
            log = container.logs(stdout=True, stderr=True).decode(errors="replace")
            container.reload()
            code = int(status.get("StatusCode", -1))
            oom = bool(container.attrs["State"].get("OOMKilled"))
            timed_out = code in sandbox.TIMEOUT_EXIT_CODES and elapsed >= spec.timeout_s - 0.5
            if spec.collect:
                self.files[spec.sample] = collect_files(self.engine, container, spec.collect)
            return code, log, timed_out, oom and not timed_out
        finally:
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True, v=True)


def collect_files(engine: Engine, container: Any, paths: tuple[str, ...]) -> dict[str, str]:
    """The regular files at `paths` (relative to /work) in the stopped container, read
    through the engine: never via the host, so a symlink the code planted reaches nothing
    of ours. Absent files, symlinks, directories and files over COLLECT_LIMIT are left out."""
    found: dict[str, str] = {}
    for path in paths:
        try:
            stream, stat = engine.call(f"read back {path}", container.get_archive,
                                       posixpath.join(sandbox.WORKDIR, path))
        except docker.errors.NotFound:
            continue
        if int(stat.get("size", 0)) > COLLECT_LIMIT:
            continue
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            member = tar.next()
            handle = tar.extractfile(member) if member is not None and member.isfile() else None
            if handle is not None:
                found[path] = handle.read().decode(errors="replace")
    return found


def _tar_of(tree: Path) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        tar.add(tree, arcname="work")
    return out.getvalue()


def tools_missing(engine: Engine, image_id: str, tools: tuple[str, ...],
                  labels: Labels) -> tuple[str, ...]:
    """Run `command -v` for each tool in a throwaway container of the image (no network)."""
    if not tools:
        return ()
    output = engine.call(
        "check tools", engine.client.containers.run, image_id,
        ["sh", "-c", TOOL_CHECK, "bakeoff-tools", *tools], remove=True, network_mode="none",
        labels=labels.as_dict(), user=workspace.sandbox_user(), stdout=True, stderr=False)
    found = set(output.decode(errors="replace").split())
    return tuple(t for t in tools if t in found)
