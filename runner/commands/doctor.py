"""`doctor`: what a bake-off needs on this machine, one line per check, each `ok`,
`missing` or `wrong` with what was found and, when not ok, the command that fixes it.

The checks: the engine answers (where DOCKER_HOST points, else the local socket), its API
version, its cgroups (the limits every container gets), its storage driver, Docker
Compose (the pinned version, in the per-user cache), the images a manifest needs (by tag
and identity, the plan `images build` follows), whether the engine can make the networks
a run needs (one internal network with our labels, made and removed), and git. The lines
are pure functions of the facts (`*_check`), so each is tested exactly without an engine.

`fix` does what can be done: starts an engine only when none answers (the bundled engine
script), installs Compose, builds the missing images; then everything is checked again.
"""

from __future__ import annotations

import secrets
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from runner.containers import images
from runner.containers.backend import ContainerEngine, EngineFacts, Labels
from runner.containers.dockerclient import LOCAL_ENGINE
from runner.containers.images import catalog, present, reporters
from runner.containers.images.present import ImageState
from runner.errors import EngineError, RunnerError
from runner.install import compose
from runner.install import engine as engine_install
from runner.manifest import DEFAULT_MANIFEST
from runner.workspace.git import GitError, run_git

Status = compose.Status  # ok, missing or wrong: a check says what Compose's cache does
FIX = "bakeoff-sandbox doctor --fix"
MIN_API = (1, 41)  # docker-py 7 needs 1.24; the oldest engine this project runs on: 20.10
SUPPORTED_STORAGE = ("overlay2",)
ENGINE_SCRIPT_TOOLS = ("mmdebstrap", "ssh")  # what the engine script installs beside dockerd
LIMITS = ("memory", "swap", "pids", "cpu")
NAME_WIDTH = 16
PROBE_LABELS = Labels(experiment="doctor", role="network-probe")
# What a storage driver other than overlay2 breaks (measured on overlay2 only).
STORAGE_BREAKS = {
    "vfs": "no copy-on-write: every container is a full copy of its image, so each "
           "sample's fresh container copies the whole toolchain image (slow, disk-hungry)",
    "devicemapper": "deprecated and removed from Docker 25: each container is a "
                    "thin-provisioned device of a fixed size",
    "aufs": "removed from Docker 24",
}
STORAGE_UNMEASURED = ("not measured with bakeoff-sandbox: sample times, disk use and the "
                      "full-disk detection are unverified")
STORAGE_FIX = ('set "storage-driver": "overlay2" in /etc/docker/daemon.json, restart the '
               f"engine, then {FIX} (images are rebuilt)")


@dataclass(frozen=True)
class DoctorCheck:
    name: str
    status: Status
    found: str
    fix: str = ""

    def lines(self) -> list[str]:
        head = f"{self.name:<{NAME_WIDTH - 1}} {self.status:<7} {self.found}"
        return [head, f"  fix: {self.fix}"] if self.fix else [head]


@dataclass(frozen=True)
class Report:
    checks: tuple[DoctorCheck, ...]

    @property
    def ok(self) -> bool:
        return all(check.status == "ok" for check in self.checks)

    def lines(self) -> list[str]:
        return [line for check in self.checks for line in check.lines()]

    def status(self, name: str) -> Status:
        return next(check.status for check in self.checks if check.name == name)


# -- the lines, from facts -----------------------------------------------------------------

def engine_fix(address: str) -> str:
    """Starting an engine is doctor's only for this machine's own socket."""
    if address == LOCAL_ENGINE:
        return f"{FIX} (as root on Debian it installs and starts dockerd)"
    return f"start the engine at {address}, or: unset DOCKER_HOST && {FIX}"


def engine_check(address: str, facts: EngineFacts | None, error: str = "") -> DoctorCheck:
    if facts is not None:
        return DoctorCheck("engine", "ok", f"Docker {facts.server_version} answers at {address}")
    if "Permission denied" in error:
        return DoctorCheck("engine", "wrong", f"the engine at {address} refuses this user "
                           "(permission denied)", "usermod -aG docker $USER, then log in again")
    return DoctorCheck("engine", "missing", f"no Docker engine answers at {address}",
                       engine_fix(address))


def version_of(text: str) -> tuple[int, ...]:
    """A dotted version as numbers (`1.41`, a cluster's `1.27+`); () when it is none."""
    try:
        return tuple(int(part.rstrip("+")) for part in text.split("."))
    except ValueError:
        return ()


def api_check(facts: EngineFacts) -> DoctorCheck:
    needed = ".".join(map(str, MIN_API))
    if version_of(facts.api_version) >= MIN_API:
        return DoctorCheck("api", "ok", f"API {facts.api_version} (needs {needed} or later)")
    return DoctorCheck("api", "wrong", f"API {facts.api_version or '?'}, older than the {needed} "
                       "bakeoff-sandbox needs", "apt-get install -y docker.io (Debian 12's "
                       "Docker 20.10 speaks API 1.41), then restart the engine")


def cgroup_check(facts: EngineFacts) -> DoctorCheck:
    version = f"cgroup v{facts.cgroup_version}"
    if facts.cgroup_version not in ("1", "2"):
        return DoctorCheck("cgroup", "wrong", f"the engine reports no cgroup version "
                           f"({facts.cgroup_version!r}): no limit can be enforced",
                           "run the engine on Linux with cgroups (v2 preferred)")
    unenforced = [name for name in LIMITS if not facts.limits.get(name)]
    if unenforced:
        return DoctorCheck("cgroup", "wrong", f"{version}: the engine cannot enforce "
                           f"{', '.join(unenforced)} limits, which every sample's container gets",
                           "boot with the memory, pids and cpu controllers (on cgroup v1 add "
                           "`cgroup_enable=memory swapaccount=1` to the kernel command line), "
                           "then restart the engine")
    return DoctorCheck("cgroup", "ok", f"{version} ({facts.cgroup_driver}): memory, swap, pids "
                       "and CPU limits enforced")


def storage_check(facts: EngineFacts) -> DoctorCheck:
    driver = facts.storage_driver or "?"
    if driver in SUPPORTED_STORAGE:
        on = f" on {facts.backing_filesystem}" if facts.backing_filesystem else ""
        return DoctorCheck("storage", "ok", f"{driver}{on}")
    return DoctorCheck("storage", "wrong",
                       f"{driver}: {STORAGE_BREAKS.get(driver, STORAGE_UNMEASURED)}", STORAGE_FIX)


def compose_check(found: compose.Found, version: str = compose.VERSION) -> DoctorCheck:
    if found.status == "ok":
        return DoctorCheck("compose", "ok", f"Docker Compose v{version} at {found.path}")
    if found.status == "missing":
        return DoctorCheck("compose", "missing", f"no Docker Compose {version} at {found.path}",
                           FIX)
    return DoctorCheck("compose", "wrong", f"{found.path} prints {found.printed!r}, not "
                       f"{compose.expected(version)!r}", FIX)


def no_manifest_check() -> DoctorCheck:
    return DoctorCheck("images", "ok", "no manifest here: -f FILE checks the images one needs")


def image_check(state: ImageState) -> DoctorCheck:
    name, fix = f"image {state.name}", f"{catalog.BUILD_CMD} {state.name}"
    if state.status == "ok":
        return DoctorCheck(name, "ok", f"{state.tag} {state.image_id[:19]} identity "
                           f"{state.identity[:19]}")
    if state.status == "missing":
        return DoctorCheck(name, "missing", f"{state.tag} is not built", fix)
    if not state.wanted:
        return DoctorCheck(name, "wrong", f"{state.tag} is built FROM a base that is missing", fix)
    return DoctorCheck(name, "wrong", f"{state.tag} is identity {state.identity[:19] or 'none'}, "
                       f"images/{catalog.split_name(state.name)[0]} now makes {state.wanted[:19]}",
                       fix)


def network_check(address: str, error: str | None) -> DoctorCheck:
    if error is None:
        return DoctorCheck("networks", "ok", "made and removed an internal network with our labels")
    found = f"the engine cannot make an internal network: {error}"
    if "address pool" in error or "non-overlapping" in error:
        return DoctorCheck("networks", "wrong", found, "bakeoff-sandbox gc --all (our leftovers; "
                           "else `docker network prune`, or more default-address-pools in "
                           "/etc/docker/daemon.json)")
    return DoctorCheck("networks", "wrong", found,
                       f"docker network create --internal probe (on the engine at {address}), "
                       "and fix what it says")


def git_check(where: str | None, version: str) -> DoctorCheck:
    if where is None:
        return DoctorCheck("git", "missing", "git is not on PATH", "apt-get install -y git")
    return DoctorCheck("git", "ok", f"{version} at {where}")


def unchecked(name: str) -> DoctorCheck:
    """A check that needs the engine, when none answers (its fix is the engine's)."""
    return DoctorCheck(name, "missing", "not checked: no engine answers (fix the engine first)")


# -- the facts -----------------------------------------------------------------------------

def manifest_path(given: Path | None) -> Path | None:
    """-f FILE, else ./bakeoff.toml when there is one, else none."""
    if given is not None:
        return given
    default = Path(DEFAULT_MANIFEST)
    return default if default.is_file() else None


def diagnose(engine: ContainerEngine, manifest: Path | None) -> Report:
    """Every check, on this machine and `engine`."""
    facts, error = _facts(engine)
    checks = [engine_check(engine.address, facts, error)]
    if facts is None:
        checks += [unchecked(name) for name in ("api", "cgroup", "storage")]
    else:
        checks += [api_check(facts), cgroup_check(facts), storage_check(facts)]
    checks.append(compose_check(compose.inspect()))
    if facts is None:
        checks += [unchecked(name) for name in ("images", "networks")]
    else:
        checks += _image_checks(engine, manifest)
        checks.append(network_check(engine.address, probe_network(engine)))
    checks.append(_git())
    return Report(tuple(checks))


def _facts(engine: ContainerEngine) -> tuple[EngineFacts | None, str]:
    try:
        return engine.facts(), ""
    except EngineError as error:
        return None, str(error)


def _image_checks(engine: ContainerEngine, manifest: Path | None) -> list[DoctorCheck]:
    if manifest is None:
        return [no_manifest_check()]
    return [image_check(s) for s in present.states(engine, catalog.needed_by_file(manifest))]


def probe_network(engine: ContainerEngine) -> str | None:
    """Make one internal network with our labels and remove it; the engine's words when
    it cannot (its address pools exhausted, most often), else None."""
    name = f"bakeoff-doctor-{secrets.token_hex(4)}"
    try:
        made = engine.create_network(name, PROBE_LABELS, egress=False)
    except EngineError as error:
        return str(error).splitlines()[0]
    engine.remove_network(made)
    return None


def _git() -> DoctorCheck:
    where = shutil.which("git")
    if where is None:
        return git_check(None, "")
    try:
        return git_check(where, run_git(Path.cwd(), "--version"))
    except (GitError, OSError) as error:
        return DoctorCheck("git", "wrong", f"{where} does not run: {error}",
                           "apt-get install -y git")


# -- the fixes -----------------------------------------------------------------------------

def fix(engine: ContainerEngine, manifest: Path | None, report: Report,
        reporter: reporters.BuildReporter, progress: Callable[[str], None]) -> Report:
    """Do what can be done for what `report` found not ok, then check everything again.
    A fix that fails is said (one line) and the others still run."""
    _attempt(progress, "start an engine", lambda: _engine(engine, report, progress))
    if report.status("compose") != "ok":
        progress(f"doctor: installing Docker Compose {compose.VERSION} into "
                 f"{compose.path().parent}")
        _attempt(progress, "install Docker Compose", compose.install)
    after = diagnose(engine, manifest)
    wanted = [c.name.removeprefix("image ") for c in after.checks
              if c.name.startswith("image ") and c.status != "ok"]
    if wanted:
        progress(f"doctor: building {', '.join(wanted)}")
        _attempt(progress, "build the images", lambda: images.build(engine, wanted, reporter))
        after = diagnose(engine, manifest)
    return after


def _engine(engine: ContainerEngine, report: Report, progress: Callable[[str], None]) -> None:
    """The engine script when no engine answers here, or when a tool it installs is
    missing (mmdebstrap bootstraps the base image, ssh reaches a DOCKER_HOST=ssh://
    engine): with an engine answering it installs those and touches nothing else."""
    state = report.status("engine")
    tools = [tool for tool in ENGINE_SCRIPT_TOOLS if shutil.which(tool) is None]
    if state == "wrong" or (state == "ok" and not tools):
        return
    if state == "missing" and engine.address != LOCAL_ENGINE:
        progress(f"doctor: no engine answers at {engine.address} (DOCKER_HOST): start it "
                 "there; doctor starts only this machine's")
        return
    why = "no engine answers" if state == "missing" else f"{', '.join(tools)} missing"
    progress(f"doctor: running the engine script ({why}; state in "
             f"{engine_install.state_dir()})")
    engine_install.ensure()


def _attempt(progress: Callable[[str], None], what: str, step: Callable[[], object]) -> None:
    try:
        step()
    except RunnerError as error:
        progress(f"doctor: could not {what}: {str(error).splitlines()[0]}")
