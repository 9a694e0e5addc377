"""`bakeoff-sandbox reproduce` and `bakeoff-sandbox rescore`: the commands.

Registered in runner/cli/app.py.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from rig.sample.record import SampleRecord
from runner.cli.progress import ImageBuildView
from runner.cli.terminal import engine as engine_for
from runner.cli.terminal import err, out
from runner.cli.terminal import load as load_manifest
from runner.commands import cluster
from runner.commands import report as report_mod
from runner.commands import reproduce as rep
from runner.commands import rescore as rescore_mod
from runner.containers.engine import Engine
from runner.errors import BadInputError
from runner.manifest import DEFAULT_MANIFEST, LoadedManifest

ManifestOpt = Annotated[Path, typer.Option("-f", "--file", help="the manifest")]
UNCOMPARED = frozenset({"schema", "seconds"})  # fresh each time by design


def _say(text: str) -> None:
    err.print(text, markup=False)


def _manifest(file: Path, sample: str) -> LoadedManifest | None:
    """The manifest; optional when SAMPLE is a record's path (the record has the rest)."""
    by_path = sample.endswith(".json") or Path(sample).is_file()
    if by_path and not file.exists():
        return None
    return load_manifest(file)


def reproduce_command(
    ctx: typer.Context,
    sample: Annotated[str, typer.Argument(
        help="CHANGE/ARM/CHECK/N, or the path to a sample record (.json)")],
    shell: Annotated[bool, typer.Option(
        "--shell", help="an interactive shell in the sample's container instead")] = False,
    file: ManifestOpt = Path(DEFAULT_MANIFEST),
) -> None:
    """Re-create a recorded sample's exact container; re-run it (or: --shell, -- CMD...)."""
    command = [a for a in ctx.args if a != "--"] if ctx.args[:1] == ["--"] else list(ctx.args)
    if shell and command:
        raise typer.BadParameter("give either --shell or -- CMD..., not both")
    if shell and not sys.stdin.isatty():
        raise BadInputError("--shell needs a terminal on stdin",
                            hint="run it from a terminal, or give the command: -- CMD...")
    loaded = _manifest(file, sample)
    if loaded is not None and (shell or command):
        cluster.refuse(loaded, "a shell or a command attached to this terminal (reproduce "
                               "--shell, -- CMD) goes through the docker CLI; re-run the "
                               "sample without them")
    located = rep.locate(sample, loaded)
    engine = Engine() if loaded is None else engine_for(loaded)
    if shell or command:
        raise typer.Exit(rep.enter(engine, located, loaded, command or None, _say))
    done = rep.rerun(engine, located, loaded, _say)
    out.print(comparison(done.old, done.new))
    if done.same:
        out.print("reproduced: the same verdict, counts and exit code", markup=False)
    else:
        out.print("NOT reproduced: the re-created container gave a different result "
                  "(same image, commit and protected files: the rig is nondeterministic, "
                  "or the sample depends on something outside them)", markup=False)
    _say(f"logs: recorded {done.old_log}, reproduced {done.new_log}")
    if not done.same:
        raise typer.Exit(3)


def comparison(old: SampleRecord, new: SampleRecord) -> Table:
    """Old against new, side by side."""
    table = Table("", "recorded", "reproduced", "", box=None)
    for name, before, after in rows(old, new):
        same = before == after or name in UNCOMPARED
        table.add_row(name, before, after, "" if same else "≠")
    return table


def rows(old: SampleRecord, new: SampleRecord) -> list[tuple[str, str, str]]:
    def counts(record: SampleRecord, field: str) -> str:
        return "-" if record.counts is None else str(getattr(record.counts, field))

    found = [("verdict", rep.verdict_text(old), rep.verdict_text(new)),
             ("exit code", str(old.exit_code), str(new.exit_code))]
    found += [(field, counts(old, field), counts(new, field))
              for field in ("passed", "failed", "skipped", "errors")]
    found += [("image", old.image_id[:19], new.image_id[:19]),
              ("commit", old.commit[:12], new.commit[:12]),
              ("schema", old.db_schema or "-", new.db_schema or "-"),
              ("seconds", f"{old.duration_s:.1f}", f"{new.duration_s:.1f}")]
    return found


def rescore_command(
    file: ManifestOpt = Path(DEFAULT_MANIFEST),
    change: Annotated[str | None, typer.Option("--change", help="only this change")] = None,
    arm: Annotated[str | None, typer.Option("--arm", help="only this arm")] = None,
    rebuild: Annotated[bool, typer.Option(
        "--rebuild", help="in freshly built images, without build cache")] = False,
) -> None:
    """Re-score recorded samples (same images, or --rebuild); print which verdicts changed."""
    loaded = load_manifest(file)
    engine = engine_for(loaded)
    with ImageBuildView(err) as view:
        results = rescore_mod.rescore(engine, loaded, change, arm, rebuild, view, _say)
    for result in results:
        if result.changed:
            out.print(changes_table(result))
        out.print(rescore_mod.verdict_line(result), markup=False)
        _say(f"records: {result.directory} (RESCORE.md)")
    try:
        done = report_mod.report(loaded)
        _say(f"report: {done.results_file} (its Rescores section), {done.page_file}")
    except BadInputError as error:
        _say(f"RESULTS.md not regenerated ({error.message}); RESCORE.md has the rescore")
    if rescore_mod.failed(results):
        raise typer.Exit(3)


def changes_table(result: rescore_mod.Rescore) -> Table:
    table = Table("sample", "recorded", "rescored", "image", "why", box=None,
                  title=f"{result.change}: changed verdicts")
    for pair in result.changed:
        image = "identical" if pair.same_image else (
            f"{pair.old.image_id[:19]} -> {pair.new.image_id[:19]}")
        table.add_row(pair.old.sample, rep.verdict_text(pair.old), rep.verdict_text(pair.new),
                      image, pair.attribution)
    return table
