"""What REPORT.html shows beyond OBSERVATION.json (`rig.report.evidence`), read from the
run directory: each sample's record, the head and tail of its log, its pictures; each
arm's dispatch record and log; the merge and its verification samples. Each arm's diff
and commit messages come from the repository's git objects (the arm branches dispatch
imported), through the git wing. No docker: the page can be rebuilt at any time.

Files are read capped (a log's head and tail, a picture up to its cap); every link is a
path relative to the run directory, to a file the run directory holds.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath
from urllib.parse import quote

from rig.report.evidence import (
    DIFF_LIMIT,
    LOG_HEAD_BYTES,
    LOG_LINES,
    LOG_TAIL_BYTES,
    MESSAGES_LIMIT,
    PASSED_LOG_LINES,
    PICTURE_CAP_BYTES,
    PICTURES_PER_SAMPLE,
    ArmEvidence,
    Dispatch,
    LogExcerpt,
    MergeFacts,
    PageEvidence,
    Picture,
    RoundEvidence,
    SampleEvidence,
    Work,
    diff_limit,
    log_excerpt,
    picture,
    printable,
)
from rig.report.observation import ArmEntry, Observation, Round
from rig.sample.oracle import sample_dir
from rig.sample.outcome import Verdict
from rig.sample.record import SampleRecord
from runner import workspace
from runner.commands.dispatch.record import load_record
from runner.commands.score import records_of
from runner.manifest import LoadedManifest
from runner.store import layout
from runner.store.records import load_merge

# Arms whose work git reads at once: a git process mostly waits on its start-up, so four
# at a time more than halve the report's time even on two cores (bench/report_scale.py).
GIT_READERS = 4


def link(directory: Path, path: Path) -> str:
    """`path` relative to the run directory, as a URL path (each part quoted)."""
    return quote(path.relative_to(directory).as_posix(), safe="/")


def read_log(directory: Path, path: Path, lines: tuple[int, int] = LOG_LINES
             ) -> LogExcerpt | None:
    """The head and tail of a stored log (None when there is none); never read whole."""
    if not path.is_file():
        return None
    size = path.stat().st_size
    with path.open("rb") as stream:
        if size <= LOG_HEAD_BYTES + LOG_TAIL_BYTES:
            return log_excerpt(link(directory, path), size,
                               stream.read(LOG_HEAD_BYTES + LOG_TAIL_BYTES), lines=lines)
        head = stream.read(LOG_HEAD_BYTES)
        stream.seek(size - LOG_TAIL_BYTES)
        return log_excerpt(link(directory, path), size, head, stream.read(LOG_TAIL_BYTES),
                           lines)


def screenshots(record: SampleRecord) -> list[str]:
    """The picture files a sample keeps beside its log, relative to its folder: a browser
    sample's screenshots (its record names them); the one place the report reads them."""
    ran = record.browser_run
    return [] if ran is None else list(ran.screenshots)


def read_pictures(folder: Path, names: Sequence[str]) -> tuple[Picture, ...]:
    """The first `PICTURES_PER_SAMPLE` of `names`, each a regular file inside `folder`
    (no `..`, no symlink), read up to the cap and embedded by `rig.report.evidence.picture`."""
    found = []
    for name in names[:PICTURES_PER_SAMPLE]:
        path = folder / name
        parts = PurePosixPath(name).parts
        if (not parts or PurePosixPath(name).is_absolute() or ".." in parts
                or path.is_symlink() or not path.is_file()):
            found.append(Picture(name, None, "not embedded: not a file of the sample's folder"))
            continue
        size = path.stat().st_size
        with path.open("rb") as stream:
            data = stream.read(PICTURE_CAP_BYTES) if size <= PICTURE_CAP_BYTES else b""
        found.append(picture(name, data, size))
    more = len(names) - PICTURES_PER_SAMPLE
    if more > 0:
        found.append(Picture(f"{more} more", None, "not embedded: "
                             f"{PICTURES_PER_SAMPLE} pictures per sample are shown"))
    return tuple(found)


def _samples(directory: Path, root: Path, arm: str) -> list[SampleEvidence]:
    """Every stored sample of `arm` (or verification label) under a sample root."""
    found = []
    for check in layout.sample_checks(root, arm):
        for record in records_of(root, arm, check):
            folder = sample_dir(root, arm, check)
            found.append(SampleEvidence(
                record=record, link=link(directory, layout.sample_record(root, arm, check,
                                                                         record.n)),
                log=read_log(directory, layout.sample_log(root, arm, check, record.n),
                             PASSED_LOG_LINES if record.verdict is Verdict.PASS else LOG_LINES),
                pictures=read_pictures(folder, screenshots(record))))
    return found


def work(loaded: LoadedManifest, base: str, commit: str, limit: int = DIFF_LIMIT) -> Work:
    """The arm's diff from the base (at most `limit` bytes of it) and its commit messages,
    from git objects."""
    repo = loaded.repo_path
    try:
        diff, more = workspace.work_diff(repo, base, commit, limit=limit)
        messages, more_messages = workspace.work_messages(repo, base, commit,
                                                          limit=MESSAGES_LIMIT)
    except workspace.GitError as error:
        return Work(missing=f"no diff to show: commit {commit} or base {base} is not in "
                            f"{repo} (was a branch deleted and collected?): {error}")
    whole = shlex.join(["git", "-C", str(repo), "diff", base, commit])
    return Work(printable(diff), more, printable(messages), more_messages, whole=whole)


def arm_evidence(loaded: LoadedManifest, directory: Path, round_: Round,
                 entry: ArmEntry, limit: int = DIFF_LIMIT) -> ArmEvidence:
    record = load_record(layout.arm_record(directory, round_.change, entry.arm))
    return ArmEvidence(
        dispatch=None if record is None else Dispatch.model_validate(
            record.model_dump(mode="json")),
        dispatch_log=read_log(directory, layout.dispatch_log(directory, round_.change,
                                                             entry.arm)),
        work=work(loaded, round_.base_commit, entry.commit, limit))


def round_evidence(loaded: LoadedManifest, directory: Path, round_: Round,
                   limit: int = DIFF_LIMIT) -> RoundEvidence:
    """One round's stored files; each arm's diff cut at `limit` bytes."""
    stage = layout.stage_dir(directory, round_.change)
    scored = [s for entry in round_.arms for s in _samples(directory, stage, entry.arm)]
    checks = layout.merge_dir(stage)
    verification = {label: _samples(directory, checks, label)
                    for label in layout.sample_arms(checks)}
    merged = load_merge(stage)
    card = layout.scorecard_file(stage)
    with ThreadPoolExecutor(GIT_READERS) as pool:  # each arm's git reads, a few at a time
        arms = list(pool.map(lambda e: arm_evidence(loaded, directory, round_, e, limit),
                             round_.arms))
    return RoundEvidence(
        arms={e.arm: found for e, found in zip(round_.arms, arms, strict=True)},
        samples={s.record.sample: s for s in [*scored, *(s for found in verification.values()
                                                         for s in found)]},
        merge=None if merged is None else MergeFacts.model_validate(
            merged.model_dump(mode="json", by_alias=True)),
        verification={label: tuple(s.record.sample for s in found)
                      for label, found in verification.items()},
        scorecard=link(directory, card) if card.is_file() else None)


def collect(loaded: LoadedManifest, obs: Observation) -> PageEvidence:
    """Everything the page shows beyond `obs`, for every round of it."""
    directory = layout.experiment_dir(loaded.repo_path, loaded.manifest.experiment.name)
    files = {"RESULTS.md": layout.results_file(directory),
             "OBSERVATION.json": layout.observation_file(directory)}
    limit = diff_limit(sum(len(r.arms) for r in obs.rounds))
    return PageEvidence(
        rounds={r.change: round_evidence(loaded, directory, r, limit) for r in obs.rounds},
        reproduce=f"bakeoff-sandbox reproduce -f {shlex.quote(str(loaded.path))}",
        files={label: link(directory, path) for label, path in files.items()
               if path.is_file()})
