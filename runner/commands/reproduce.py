"""`reproduce`: re-create the exact container of a recorded sample (principle 9).

From the sample's record alone: the same image ID (refused, in one line, when that image
is gone: nothing is ever pulled), a fresh copy of the same commit's tree with the same
protected files restored (their sha256 must equal the record's), the recorded env with
its secrets re-read from the environment (a fresh schema and its URL when the sample had
one: a record only ever holds `***`), the same limits and network mode. The container is
made by the same `DockerSampleExecutor` code that made the original, so "is it the model
or the rig?" is asked of the very container that produced the verdict.

The re-run is written beside nothing it could overwrite: `.bakeoff/<exp>/reproduce/`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from rig.guards.tripwire import Finding
from rig.parsers import UnknownParserError, get_parser
from rig.sample.metric import Ratchet
from rig.sample.oracle import run_sample, sample_dir
from rig.sample.record import SampleRecord
from rig.sample.spec import Execution, SampleSpec, ServerSpec, StackSpec
from rig.sample.tree import unshown
from rig.sample.verdict import Verdict
from runner import workspace
from runner.commands.sample_plan import METRIC_PARSER
from runner.containers import database, images, sandbox
from runner.containers.backend import ContainerEngine
from runner.containers.images import BuiltImage, catalog, prepared
from runner.containers.samples.executor import DockerSampleExecutor
from runner.containers.samples.tree import protected_hashes
from runner.errors import BadInputError, InfraError
from runner.manifest import LoadedManifest
from runner.manifest.models import Limits
from runner.store import layout
from runner.store.layout import STATE_ROOT, experiment_dir, stage_dir

Say = Callable[[str], None]
REDACTED = "***"
DEFAULT_TIMEOUT_S = float(Limits.model_fields["check_timeout_s"].default)
CLI = "bakeoff-sandbox"


class ImageGoneError(InfraError):
    """The exact image of a record no longer exists. One line: image, id, rebuild (exit 3)."""

    def __init__(self, record: SampleRecord, now: str | None) -> None:
        self.record = record
        moved = f" (the tag now names {now}, a different image)" if now else ""
        super().__init__(
            f"sample {record.sample} ran in image {record.image or '?'} "
            f"({record.image_id or 'no id recorded'}), which no longer exists{moved} and "
            f"is never pulled: rebuild with {rebuild_command(record)}; the exact container "
            "cannot be re-created, so reproduce a record of the rebuilt image instead")


class ProtectedMismatchError(InfraError):
    """The restored protected files are not the ones the sample was graded with (exit 3)."""


@dataclass(frozen=True)
class Located:
    """A record and where it lives: the repository and the experiment it belongs to."""

    record: SampleRecord
    path: Path
    repo: Path
    experiment: str


@dataclass(frozen=True)
class Reproduction:
    """A recorded sample and its re-run in a re-created container."""

    old: SampleRecord
    new: SampleRecord
    old_log: Path
    new_log: Path

    @property
    def same(self) -> bool:
        return outcome_of(self.old) == outcome_of(self.new)


def outcome_of(record: SampleRecord) -> tuple[object, ...]:
    """What a reproduction must give again: verdict, reason, counts and exit code."""
    counts = None if record.counts is None else record.counts.model_dump()
    return record.verdict, record.reason, counts, record.exit_code


def rebuild_command(record: SampleRecord) -> str:
    """How to rebuild a record's image, in backticks (a prepared one: rescore --rebuild)."""
    rescore = f"`{CLI} rescore --change {record.change} --arm {record.arm} --rebuild`"
    if record.image.startswith(f"bakeoff/{prepared.PREPARED}:"):
        return rescore
    name = catalog.name_of(record.image)
    if name is None:
        return f"`docker load` (or a build of) {record.image}, then {rescore}"
    return (f"`{catalog.BUILD_CMD} {name}` (or rebuild and re-score in one step: "
            f"{rescore})")


# -- finding a record ------------------------------------------------------------------


def locate(sample: str, loaded: LoadedManifest | None) -> Located:
    """SAMPLE is a path to a record, or CHANGE/ARM/CHECK/N looked up under stages/."""
    path = Path(sample)
    if path.suffix == ".json" or path.is_file():
        return _at_path(path)
    if loaded is None:
        raise BadInputError(f"no manifest to look {sample!r} up in",
                            hint="pass -f FILE, or the path to the record's .json")
    parts = sample.split("/")
    if len(parts) != 4 or not parts[3].isdigit():
        raise BadInputError(f"{sample!r} is not CHANGE/ARM/CHECK/N",
                            hint="e.g. cap-horizon/C1/success/2, or a record's .json path")
    change, arm, check, n = parts
    experiment = loaded.manifest.experiment.name
    stage = stage_dir(experiment_dir(loaded.repo_path, experiment), change)
    found = _candidates(stage, arm, check, int(n))
    if not found:
        raise BadInputError(f"no record of sample {sample} under {stage}",
                            hint="`bakeoff-sandbox status` lists what was scored; "
                                 "or pass the path to the record's .json")
    if len(found) > 1:
        raise BadInputError(f"sample {sample} has {len(found)} records: "
                            + ", ".join(str(p) for p in found),
                            hint="pass the path of the one you mean")
    return Located(_read(found[0]), found[0], loaded.repo_path, experiment)


def _candidates(stage: Path, arm: str, check: str, n: int) -> list[Path]:
    """The scored record first; else a proof's or the merge's (never a rescore's copy)."""
    scored = layout.sample_record(stage, arm, check, n)
    if scored.is_file():
        return [scored]
    roots = [*layout.proof_roots(stage), layout.merge_dir(stage)]
    return sorted(found for root in roots
                  if (found := layout.sample_record(root, arm, check, n)).is_file())


def _at_path(path: Path) -> Located:
    if not path.is_file():
        raise BadInputError(f"no sample record at {path}", hint="check the path")
    resolved = path.resolve()
    found = layout.run_dir_of(resolved)
    if found is None:
        raise BadInputError(f"{path} is not under a {STATE_ROOT}/<experiment>/ directory",
                            hint="pass a record from the experiment's run directory")
    return Located(_read(resolved), resolved, *found)


def _read(path: Path) -> SampleRecord:
    try:
        return SampleRecord.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise BadInputError(f"{path} is not a sample record: {error}".splitlines()[0],
                            hint="pass a samples/<arm>/<check>/<n>.json file") from error


def manifest_for(located: Located, loaded: LoadedManifest | None) -> LoadedManifest | None:
    """The manifest, when it is the one of the record's repository and experiment."""
    if loaded is None or loaded.manifest.experiment.name != located.experiment:
        return None
    return loaded if loaded.repo_path.resolve() == located.repo.resolve() else None


# -- re-creating a sample's setting ------------------------------------------------------


def recorded_image(engine: ContainerEngine, record: SampleRecord) -> BuiltImage:
    """The exact image of a record; `ImageGoneError` when that image ID is gone."""
    attrs = images.inspect(engine, record.image_id) if record.image_id else None
    if attrs is None:
        now = images.inspect(engine, record.image) if record.image else None
        raise ImageGoneError(record, None if now is None else str(now["Id"]))
    name = (prepared.PREPARED if record.image.startswith(f"bakeoff/{prepared.PREPARED}:")
            else catalog.name_of(record.image) or record.image)
    return BuiltImage(name, record.image, str(attrs["Id"]), record.image_identity, cached=True)


def url_env_of(record: SampleRecord, loaded: LoadedManifest | None) -> str | None:
    """The variable that carried the sample's database URL (redacted in the record)."""
    for key, value in record.env.items():
        if value.startswith(("postgresql://", "postgres://")) and f":{REDACTED}@" in value:
            return key
    if record.db_schema is not None and loaded is not None and loaded.manifest.database:
        return loaded.manifest.database.url_env
    return None


def secret_keys(record: SampleRecord) -> list[str]:
    return [k for k, v in record.env.items() if REDACTED in v]


def recorded_env(record: SampleRecord, url_env: str | None) -> dict[str, str]:
    """The record's env; each secret re-read from our environment, never from the record.
    The database URL is left out: the executor sets it for the sample's fresh schema."""
    env: dict[str, str] = {}
    for key, value in record.env.items():
        if key == url_env:
            continue
        if REDACTED in value:
            if key not in os.environ:
                raise BadInputError(f"sample {record.sample}: {key} is a secret (redacted in "
                                    "the record), and it is not set here",
                                    hint=f"export {key}, then run this again")
            value = os.environ[key]
        env[key] = value
    return env


def spec_of(record: SampleRecord, loaded: LoadedManifest | None) -> SampleSpec:
    """The sample as it was specified: command, parser, protected paths, tools, contract."""
    timeout = loaded.manifest.limits.check_timeout_s if loaded else DEFAULT_TIMEOUT_S
    return SampleSpec(change=record.change, arm=record.arm, check=record.check, n=record.n,
                      commit=record.commit, base_commit=record.base_commit,
                      command=record.command, parser=record.parser, timeout_s=timeout,
                      protected=tuple(unshown(p) for p in record.protected),
                      requires=tuple(record.requires),
                      contract=record.contract, server=server_of(record, loaded),
                      stack=stack_of(record), ratchet=ratchet_of(record, loaded),
                      harness="base" if record.harness == "base" else "arm",
                      token=_token(record), guard=_guard(record), build=tuple(record.build),
                      browser=record.browser)


def _guard(record: SampleRecord) -> Finding | None:
    """What the check's tripwire showed when the sample was graded (`rig.guards.tripwire`): a
    replay is graded with it again."""
    seen = (record.canaries or {}).get("tripwire")
    if not isinstance(seen, dict) or "blind" not in seen:
        return None
    def text(key: str) -> str | None:
        value = seen.get(key)
        return value if isinstance(value, str) else None
    return Finding(text("sample") or "", text("blind"), text("unguarded"))


def _token(record: SampleRecord) -> str | None:
    """The recorded canaries' names: a reproduction plants the same ones."""
    token = (record.canaries or {}).get("token")
    return token if isinstance(token, str) else None


def gradable(record: SampleRecord) -> bool:
    """Re-grading needs the record's parser, or a ratchet's metric (from the manifest)."""
    if record.parser == METRIC_PARSER:
        return True
    try:
        get_parser(record.parser)
    except UnknownParserError:
        return False
    return True


def ratchet_of(record: SampleRecord, loaded: LoadedManifest | None) -> Ratchet | None:
    """A ratchet sample is graded against the base value it recorded, on the metric the
    manifest defines (how to read the value is not in the record)."""
    if record.parser != METRIC_PARSER:
        return None
    check = None if loaded is None else next(
        (c for c in loaded.manifest.checks if c.name == record.check and c.kind == "ratchet"),
        None)
    if check is None or check.metric is None or check.better is None:
        raise BadInputError(f"sample {record.sample} is a ratchet, and no manifest here says "
                            f"how its metric {record.check!r} is read",
                            hint="run from the experiment's repository, or pass -f FILE")
    return Ratchet(check.metric, check.better, check.tolerance, record.metric_base)


def ensure_gradable(record: SampleRecord) -> None:
    if not gradable(record):
        raise BadInputError(f"sample {record.sample} was graded by {record.parser!r}, which "
                            "reproduce and rescore cannot re-grade from a record",
                            hint="stand in its container with --shell or -- CMD... instead")


def stack_of(record: SampleRecord) -> StackSpec | None:
    """The recorded stack: its compose file by the recorded path and hash, its services on
    the recorded image IDs (a fresh project of the same bytes and the same images: a file
    changed since, or an image gone, is an infra error naming it)."""
    found = record.stack
    return None if found is None else StackSpec(found.file, found.sha256, found.timeout_s,
                                                tuple(sorted(found.services.items())))


def server_of(record: SampleRecord, loaded: LoadedManifest | None) -> ServerSpec | None:
    """A per-sample server is not in the record: it comes from the change's manifest."""
    if record.server == "none":
        return None
    found = None
    if loaded is not None and record.check == "success":
        found = next((c.success.server for c in loaded.manifest.changes
                      if c.id == record.change), None)
    if found is None:
        raise BadInputError(f"sample {record.sample} ran with a server per sample, and no "
                            "manifest here says how to start it",
                            hint="run from the experiment's repository, or pass -f FILE")
    return ServerSpec(found.run, found.health, found.port_env, found.startup_timeout_s)


def limits_of(record: SampleRecord) -> sandbox.SandboxLimits:
    try:
        limits = record.limits
        return sandbox.SandboxLimits(float(limits["cpus"]), int(limits["memory_mb"]),
                                     int(limits["pids"]),
                                     int(limits.get("disk_mb", sandbox.SandboxLimits.disk_mb)),
                                     int(limits.get("max_files", sandbox.SandboxLimits.max_files)))
    except KeyError as error:
        raise BadInputError(f"sample {record.sample}'s record has no limit {error}",
                            hint="re-score the commit: this record cannot be re-created") from error


def verify_protected(repo: Path, record: SampleRecord) -> None:
    """The commit exists and its protected files restore to the recorded sha256."""
    for commit in {record.commit, record.base_commit}:
        if workspace.commit_of(repo, commit) is None:
            raise BadInputError(f"commit {commit} of sample {record.sample} is not in {repo}",
                                hint="was its arm branch deleted? fetch it back first")
    named = {unshown(p): p for p in record.protected}  # a record holds names as `shown`
    restored = {named[p]: digest for p, digest in
                protected_hashes(repo, record.base_commit, tuple(named)).items()}
    differ = [p for p in record.protected if restored.get(p) != record.protected[p]]
    if differ:
        shown = ", ".join(f"{p} (recorded {record.protected[p][:12]}, now "
                          f"{restored.get(p, '?')[:12]})" for p in differ)
        raise ProtectedMismatchError(
            f"sample {record.sample}: the protected files restored now are not the ones it "
            f"was graded with: {shown}",
            hint="the record or the repository was altered; re-score instead")


def executor_for(engine: ContainerEngine, located: Located, loaded: LoadedManifest | None,
                 image: BuiltImage) -> DockerSampleExecutor:
    """An executor like the original: same image, limits and (with a schema) database."""
    record = located.record
    url_env = url_env_of(record, loaded)
    db_image = None
    if record.db_schema is not None:
        wanted = loaded.manifest.database.image if loaded and loaded.manifest.database \
            else "postgres"
        db_image = images.resolve(engine, wanted)
    section = loaded.manifest.database if loaded else None
    return DockerSampleExecutor(engine, located.repo, located.experiment, image,
                                limits_of(record), url_env, db_image,
                                db_policy=database.policy_of(section))


class RecordedEnvExecutor:
    """Runs a spec with the recorded env laid over; secrets are redacted again on the way
    out, so a re-read secret never lands in a new record."""

    def __init__(self, executor: DockerSampleExecutor, env: Mapping[str, str],
                 secrets: list[str], redacted: Mapping[str, str]) -> None:
        self.executor, self.env, self.secrets, self.redacted = executor, env, secrets, redacted

    def setup(self) -> None:
        """The wrapped executor's lifecycle belongs to whoever opened it."""

    def teardown(self) -> None:
        """The wrapped executor's lifecycle belongs to whoever opened it."""

    def execute(self, spec: SampleSpec) -> Execution:
        done = self.executor.execute(spec, self.env)
        env = {k: self.redacted[k] if k in self.secrets and k in self.redacted else v
               for k, v in done.env.items()}
        return dataclasses.replace(done, env=env)


# -- the three ways in -------------------------------------------------------------------


def rerun(engine: ContainerEngine, located: Located, loaded: LoadedManifest | None,
          say: Say) -> Reproduction:
    """Re-run the sample's command in a re-created container; keep the new record apart."""
    record = located.record
    loaded = manifest_for(located, loaded)
    ensure_gradable(record)
    image = recorded_image(engine, record)
    spec = spec_of(record, loaded)
    verify_protected(located.repo, record)
    url_env = url_env_of(record, loaded)
    env = recorded_env(record, url_env)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S.%f")
    out = layout.reproduce_dir(experiment_dir(located.repo, located.experiment),
                               f"{stamp}-{record.sample.replace('/', '-')}")
    say(f"reproducing {record.sample} in {image.tag} ({image.image_id[:19]}) at "
        f"{record.commit[:12]}")
    with executor_for(engine, located, loaded, image) as executor:
        wrapped = RecordedEnvExecutor(executor, env, secret_keys(record), record.env)
        new = run_sample(wrapped, spec, out)
    return Reproduction(record, new, located.path.with_name(record.log),
                        sample_dir(out, record.arm, record.check) / new.log)


def enter(engine: ContainerEngine, located: Located, loaded: LoadedManifest | None,
          command: list[str] | None, say: Say) -> int:
    """`--shell` (command None): an interactive shell in the re-created container; else
    run `command` there. Returns its exit code."""
    record = located.record
    loaded = manifest_for(located, loaded)
    image = recorded_image(engine, record)
    spec = spec_of(record, loaded)
    verify_protected(located.repo, record)
    env = recorded_env(record, url_env_of(record, loaded))
    with executor_for(engine, located, loaded, image) as executor:
        return executor.interactive(spec, env, command, say)


def verdict_text(record: SampleRecord) -> str:
    if record.verdict is Verdict.PASS or record.reason is None:
        return str(record.verdict)
    return f"{record.verdict} {record.reason}"
