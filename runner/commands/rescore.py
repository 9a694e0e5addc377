"""`rescore`: re-score recorded samples and say which verdicts changed, and why.

Every recorded sample of a stage (`stages/<change>/samples/`, optionally one arm) is
run again from its record (its commit, command, parser, protected files, tools, env and
limits; never the current manifest's commands, so an edit cannot change what is
graded): by default in the very images that produced them, with `--rebuild` in the
toolchain rebuilt without build cache and prepared images made again from it.

A verdict that changes between IDENTICAL images (same image ID) is the rig's
nondeterminism, not the model's; one that changes with the image is the image's. The
new records go beside the old ones (`stages/<change>/rescore/<stamp>/`), never over
them, with a RESCORE.md and a rescore.json that `report` summarises in RESULTS.md.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from rig.persist import write_text_atomic
from rig.sample.oracle import run_sample
from rig.sample.record import SampleRecord
from rig.sample.verdict import Verdict
from runner.commands import reproduce as rep
from runner.containers import images, sandbox
from runner.containers.backend import ContainerEngine
from runner.containers.images import BuiltImage, catalog, prepared
from runner.containers.images.reporters import BuildReporter
from runner.errors import BadInputError, EngineRefusedError, InfraError
from runner.manifest import LoadedManifest
from runner.store import layout
from runner.store.layout import experiment_dir, stage_dir
from runner.store.records import (
    RescoredSample,
    RescoredSide,
    RescoreRecord,
    load_rescore,
    save_rescore,
)

Say = Callable[[str], None]
NONDETERMINISM = "the rig's nondeterminism (identical image), not the model's"
IMAGE_CHANGED = "the image changed"


@dataclass(frozen=True)
class Pair:
    """A recorded sample and its re-score."""

    old: SampleRecord
    new: SampleRecord

    @property
    def changed(self) -> bool:
        return (self.old.verdict, self.old.reason) != (self.new.verdict, self.new.reason)

    @property
    def same_image(self) -> bool:
        return self.old.image_id == self.new.image_id

    @property
    def attribution(self) -> str:
        if not self.changed:
            return ""
        return NONDETERMINISM if self.same_image else IMAGE_CHANGED


@dataclass(frozen=True)
class Rescore:
    """One stage's re-score: where its records are and how each sample compares."""

    change: str
    directory: Path
    rebuild: bool
    pairs: list[Pair]

    @property
    def changed(self) -> list[Pair]:
        return [p for p in self.pairs if p.changed]

    @property
    def nondeterministic(self) -> list[Pair]:
        return [p for p in self.changed if p.same_image]


def recorded(loaded: LoadedManifest, change: str, arm: str | None) -> list[SampleRecord]:
    """The stage's scored sample records (one arm's when `arm` is given), in order."""
    stage = stage_dir(experiment_dir(loaded.repo_path, loaded.manifest.experiment.name), change)
    paths = layout.sample_records(stage, arm)
    found = [SampleRecord.model_validate_json(p.read_text(encoding="utf-8")) for p in paths]
    return sorted(found, key=lambda r: (r.arm, r.check, r.n))


def rescore(engine: ContainerEngine, loaded: LoadedManifest, change: str | None, arm: str | None,
            rebuild: bool, reporter: BuildReporter, say: Say) -> list[Rescore]:
    """Re-score every recorded sample of the chosen stages; write RESCORE.md per stage."""
    todo = to_rescore(loaded, change, arm, say)
    records = [r for found in todo.values() for r in found]
    if rebuild:
        fresh = rebuilt_images(engine, loaded, sorted({r.commit for r in records}), reporter,
                               say)
        image_of = {r.sample: fresh[r.commit] for r in records}
    else:  # every image is checked before anything runs: a gone one refuses the lot
        image_of = {r.sample: rep.recorded_image(engine, r) for r in records}
    results = []
    for change_id, found in todo.items():
        chosen = [(r, image_of[r.sample]) for r in found]
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S.%f")
        directory = layout.rescore_dir(
            stage_dir(experiment_dir(loaded.repo_path, loaded.manifest.experiment.name),
                      change_id), stamp)
        new = run_records(engine, loaded, chosen, directory, say)
        result = Rescore(change_id, directory, rebuild,
                         [Pair(old, new[old.sample]) for old, _ in chosen])
        write(result)
        results.append(result)
    return results


def to_rescore(loaded: LoadedManifest, change: str | None, arm: str | None,
               say: Say) -> dict[str, list[SampleRecord]]:
    """The re-gradable recorded samples of each chosen stage (a ratchet's are skipped)."""
    changes = [loaded.change(change).id] if change else [c.id for c in loaded.manifest.changes]
    todo = {c: found for c in changes if (found := recorded(loaded, c, arm))}
    if not todo:
        where = f"change {change}" if change else "any change"
        raise BadInputError(f"no recorded samples{f' of arm {arm}' if arm else ''} in {where}",
                            hint="run `bakeoff-sandbox score` first")
    for skipped in (r for found in todo.values() for r in found if not rep.gradable(r)):
        say(f"{skipped.sample}: skipped, graded by {skipped.parser!r} (not re-gradable here)")
    return {c: kept for c, found in todo.items()
            if (kept := [r for r in found if rep.gradable(r)])}


def rebuilt_images(engine: ContainerEngine, loaded: LoadedManifest, commits: list[str],
                   reporter: BuildReporter, say: Say) -> dict[str, BuiltImage]:
    """The toolchain built again without cache; each commit's prepared image made again
    from it (the old prepared tag is removed first: its key would otherwise reuse it)."""
    name = loaded.manifest.toolchain.image
    if name not in catalog.known_names():
        raise BadInputError(f"{loaded.path}: toolchain.image {name!r} is not built from "
                            f"{catalog.images_dir()}, so --rebuild cannot rebuild it",
                            hint="rebuild that image yourself, then rescore without --rebuild")
    node = prepared.node_for(loaded)
    wanted = catalog.with_variant(name, None if node is None else node.major)
    toolchain = next(b for b in images.build(engine, [wanted], reporter, nocache=True)
                     if b.name == wanted)
    say(f"rebuilt {toolchain.tag} without cache: {toolchain.image_id}")
    setup = prepared.Setup.of(loaded.manifest.toolchain)
    removed: set[str] = set()
    fresh: dict[str, BuiltImage] = {}
    for commit in commits:
        if setup.commands:
            tag, _ = prepared.tag_of(loaded.repo_path, commit, toolchain, setup)
            if tag not in removed:
                _remove_prepared(engine, tag)
                removed.add(tag)
        fresh[commit] = prepared.prepare(engine, loaded.repo_path, commit, toolchain, setup,
                                         say)
    return fresh


def _remove_prepared(engine: ContainerEngine, tag: str) -> None:
    try:
        images.remove_ours(engine, tag)
    except EngineRefusedError as error:
        raise InfraError(f"cannot remove the prepared image {tag} to rebuild it: {error}",
                         hint="a container may still use it: `bakeoff-sandbox down` first"
                         ) from error


def run_records(engine: ContainerEngine, loaded: LoadedManifest,
                chosen: list[tuple[SampleRecord, BuiltImage]], directory: Path,
                say: Say) -> dict[str, SampleRecord]:
    """Each record's sample again, one executor per (image, limits, database) group."""
    groups: dict[tuple[object, ...], list[tuple[SampleRecord, BuiltImage]]] = {}
    for record, image in chosen:
        key = (image.image_id, tuple(sorted(record.limits.items())), record.db_schema is None)
        groups.setdefault(key, []).append((record, image))
    new: dict[str, SampleRecord] = {}
    for members in groups.values():
        first, image = members[0]
        where = rep.Located(first, directory, loaded.repo_path, loaded.manifest.experiment.name)
        with rep.executor_for(engine, where, loaded, image) as executor:
            def one(record: SampleRecord) -> SampleRecord:
                url_env = rep.url_env_of(record, loaded)
                wrapped = rep.RecordedEnvExecutor(executor, rep.recorded_env(record, url_env),
                                                  rep.secret_keys(record), record.env)
                done = run_sample(wrapped, rep.spec_of(record, loaded), directory)
                say(f"{done.sample}: {rep.verdict_text(record)} -> {rep.verdict_text(done)}")
                return done

            with ThreadPoolExecutor(max_workers=sandbox.workers(engine)) as pool:
                for done in pool.map(one, [record for record, _ in members]):
                    new[done.sample] = done
    return new


def summary(result: Rescore) -> RescoreRecord:
    """rescore.json: what `report` reads back."""
    def side(record: SampleRecord) -> RescoredSide:
        counts = None if record.counts is None else record.counts.model_dump()
        return RescoredSide(verdict=str(record.verdict), reason=record.reason, counts=counts,
                            exit_code=record.exit_code, image=record.image,
                            image_id=record.image_id)
    return RescoreRecord(
        change=result.change, rebuild=result.rebuild, directory=result.directory.name,
        samples=[RescoredSample(sample=p.old.sample, old=side(p.old), new=side(p.new),
                                changed=p.changed, same_image=p.same_image,
                                attribution=p.attribution) for p in result.pairs])


def write(result: Rescore) -> None:
    save_rescore(result.directory / layout.RESCORE_SUMMARY, summary(result))
    write_text_atomic(result.directory / layout.RESCORE_CARD, render(result))


def render(result: Rescore) -> str:
    """RESCORE.md: every sample, old against new, and the attribution of each change."""
    images_used = ("rebuilt without build cache (--rebuild)" if result.rebuild
                   else "the recorded images (same image IDs)")
    lines = [f"# Rescore of `{result.change}`: {result.directory.name}", "",
             f"Images: {images_used}. The recorded samples are in `../../samples/`; these "
             "are new records beside them.", "",
             "| sample | recorded | rescored | image | changed |",
             "|---|---|---|---|---|"]
    for pair in result.pairs:
        image = ("same" if pair.same_image
                 else f"{pair.old.image_id[:19]} -> {pair.new.image_id[:19]}")
        lines.append(f"| {pair.old.sample} | {rep.verdict_text(pair.old)} | "
                     f"{rep.verdict_text(pair.new)} | {image} | {pair.attribution or 'no'} |")
    lines += ["", verdict_line(result), ""]
    return "\n".join(lines)


def verdict_line(result: Rescore) -> str:
    total, changed, odd = len(result.pairs), len(result.changed), len(result.nondeterministic)
    line = (f"{total} sample{'' if total == 1 else 's'} re-scored: {changed} "
            f"verdict{'' if changed == 1 else 's'} changed")
    if odd:
        line += (f"; {odd} of them between identical images: the rig's nondeterminism, "
                 "not the model's")
    return line + "."


def failed(results: list[Rescore]) -> bool:
    """Exit 3: a verdict moved between identical images, or a rig error remains."""
    return any(r.nondeterministic or any(p.new.verdict is Verdict.RIG_ERROR for p in r.pairs)
               for r in results)


def results_section(loaded: LoadedManifest) -> str:
    """RESULTS.md's "Rescores": each stage's latest rescore and its changed verdicts."""
    directory = experiment_dir(loaded.repo_path, loaded.manifest.experiment.name)
    lines: list[str] = []
    for change in loaded.manifest.changes:
        found = layout.rescore_summaries(stage_dir(directory, change.id))
        if not found:
            continue
        data = load_rescore(found[-1])
        if data is None:
            continue
        moved = [s for s in data.samples if s.changed]
        how = "images rebuilt without cache" if data.rebuild else "same images"
        lines.append(f"- `{change.id}`, {data.directory} ({how}): {len(data.samples)} "
                     f"sample(s), {len(moved)} verdict(s) changed "
                     f"(`{found[-1].with_name(layout.RESCORE_CARD).relative_to(directory)}`)")
        lines += [f"  - {s.sample}: {_side(s.old)} -> {_side(s.new)}: "
                  f"{s.attribution}" for s in moved]
    if not lines:
        return ""
    return "\n## Rescores\n\n" + "\n".join(lines) + "\n"


def _side(side: RescoredSide) -> str:
    return f"{side.verdict} {side.reason}" if side.reason else side.verdict
