"""A sample's setting: where it runs, made fresh for each sample and gone after it. Its
inputs (the commit's tree from git objects with the rig's layer on top,
`runner.containers.samples.tree`: the base's harness and protected files, no bytecode,
canaries; the driver, the observer and what it checks against), a fresh empty database,
its network, and its env.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from rig.guards import canary as canary_mod
from rig.guards import inprocess
from rig.sample import links
from rig.sample.spec import SampleSpec
from rig.sample.tree import Indexed, UnsafeTreeError
from runner.containers import database, sandbox
from runner.containers.images.facts import TMPFS_DIRS, ImageFacts
from runner.containers.samples import driver
from runner.containers.samples.network import SampleNetworks
from runner.containers.samples.tree import SampleTree, Trees, build, nul_list
from runner.errors import SandboxUnavailableError

HOME = sandbox.HOME
IN_DIR = driver.IN
EMPTY = f"{IN_DIR}/empty"  # a root-owned empty file of the rig's inputs
OBSERVER_FILES = {"plugin/bakeoff_hook.py": "observer_hook.py",
                  "plugin/sitecustomize.py": "observer_site.py",
                  f"plugin/{canary_mod.PLUGIN_MODULE}.py": "observer_plugin.py",
                  "observe/reader.py": "observer_reader.py"}


@dataclass(frozen=True)
class SampleSetting:
    """Where one sample runs: its inputs, network, schema, env, and its tree."""

    inputs: Path  # the host directory mounted read-only at /bakeoff/in
    env: dict[str, str]
    network: str
    schema: database.DbSchema | None
    tree: SampleTree | None  # None: the tree was refused
    refused: str | None = None
    secrets: frozenset[str] = frozenset()  # env's keys that are secrets (the database URL)


class SettingMaker:
    """Makes each sample's setting for one executor: its inputs under `scratch`, its tree
    (`trees`: each commit read and checked once), its network and database (`networks`),
    its env (`url_env`: the variable that carries the database's URL)."""

    def __init__(self, repo: Path, limits: sandbox.SandboxLimits, url_env: str | None,
                 networks: SampleNetworks, facts: ImageFacts, trees: Trees,
                 scratch: Path) -> None:
        self.repo, self.limits, self.url_env = repo, limits, url_env
        self.networks, self.facts, self.trees, self.scratch = networks, facts, trees, scratch

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
                secrets = frozenset({self.url_env} & env.keys() if self.url_env else ())
                yield SampleSetting(inputs, env, network, schema, tree, refused, secrets)
        finally:
            shutil.rmtree(inputs, ignore_errors=True)

    def _env(self, spec: SampleSpec, tree: SampleTree | None,
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
              inputs: Path) -> tuple[SampleTree | None, str | None]:
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
            built = build(spec, tree, base, inputs / "tree.tar", self.repo, spec.token,
                          importable=self.facts.python_modules(),
                          caps=links.LayoutCaps(self.limits.disk_mb * 1024 * 1024,
                                                self.limits.max_files))
        except UnsafeTreeError as error:
            return None, error.message
        (inputs / "root-owned").write_bytes(nul_list(built.root_owned))
        (inputs / "root-dirs").write_bytes(nul_list(built.root_dirs))
        (inputs / "collect").write_text("".join(f"{p}\n" for p in spec.collect))
        (inputs / "driver.sh").write_text(driver.script())
        if spec.build:  # one command a line, the first failure ends it
            (inputs / "build.sh").write_text("set -e\n" + "".join(f"{c}\n" for c in spec.build))
        (inputs / "usercustomize.py").write_text(driver.USERCUSTOMIZE)
        (inputs / "user-site").write_text(self.facts.user_site())
        (inputs / "empty").write_bytes(b"")
        if observed(spec):
            self._observer_inputs(inputs, built)
        for path in inputs.rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)
        return built, None

    def _observer_inputs(self, inputs: Path, built: SampleTree) -> None:
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
            "socket": f"{driver.OBS}/sock",
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


def toolchain_env(tree: SampleTree) -> dict[str, str]:
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


def observed(spec: SampleSpec) -> bool:
    """Whether a sample gets the rig's observer: every pytest run of the tree's (a ratchet
    is graded on its metric, never on its tests; a browser criterion's pytest is the rig's,
    in the browser's container, where nothing of the arm's runs but the page)."""
    return spec.parser == "pytest" and spec.ratchet is None and spec.browser is None


def insample(name: str) -> bytes:
    """A program of `rig/guards/insample/` (it runs inside the sample, never here)."""
    return resources.files("rig.guards.insample").joinpath(name).read_bytes()

