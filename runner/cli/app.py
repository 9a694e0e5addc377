"""The `bakeoff-sandbox` command line (docs/design.md, "The command line").

Exit codes: 0 done; 1 an unexpected internal error; 2 bad input; 3 the measurement is
invalid (a rig error, a missing image, a broken engine); 4 the frozen contract does not
match. Every error is one clear message, never a traceback.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from importlib import metadata
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from typer._click.exceptions import ClickException

from rig.errors import RigError
from runner.cli import terminal
from runner.cli.dispatch import dispatch_command
from runner.cli.dispatch_view import DispatchView
from runner.cli.init import init_command
from runner.cli.progress import ImageBuildView
from runner.cli.records import reproduce_command, rescore_command
from runner.cli.terminal import SECRETS, RedactedStream, err, out, redact, say
from runner.commands import cleanup, cluster
from runner.commands import demo as demo_mod
from runner.commands import doctor as doctor_mod
from runner.commands import down as down_mod
from runner.commands import merge as merge_mod
from runner.commands import report as report_mod
from runner.commands import run as run_mod
from runner.commands import score as score_mod
from runner.commands import up as up_mod
from runner.containers import images
from runner.containers.backend import ContainerEngine
from runner.containers.engine import Engine
from runner.containers.images import catalog, registry, reporters
from runner.errors import InfraError, RunnerError
from runner.install.engine import state_dir
from runner.manifest import (
    DEFAULT_MANIFEST,
    LoadedManifest,
    json_schema,
)
from runner.manifest.models import KubernetesSection
from runner.store import layout
from runner.store import state as state_mod

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Fair, container-isolated bake-offs between AI coding agents.")
images_app = typer.Typer(no_args_is_help=True, help="Build the local images (nothing is pulled).")
app.add_typer(images_app, name="images")

# `CMD ARGS...` after `--` reach the command untouched (exec, reproduce).
EXTRA_ARGS = {"allow_extra_args": True, "ignore_unknown_options": True}
DIST = "bakeoff-sandbox"  # the distribution whose metadata holds the version
ManifestOpt = Annotated[Path, typer.Option("-f", "--file", help="the manifest")]


def _load(path: Path) -> LoadedManifest:
    # the arms' secrets are redacted from here on
    return terminal.load(path)


def _engine(loaded: LoadedManifest, *, proved: bool = True) -> ContainerEngine:
    """The command's engine: docker's, or the manifest's cluster (proved first when the
    command runs containers there)."""
    return terminal.engine(loaded, proved=proved)


_say = say


def _version(shown: bool) -> None:
    if shown:
        try:
            version = metadata.version(DIST)
        except metadata.PackageNotFoundError:  # a source tree on PYTHONPATH, not installed
            version = "(not installed: `pip install .` in the source tree)"
        out.print(f"{DIST} {version}", markup=False)
        raise typer.Exit(0)


@app.callback()
def _root(version: Annotated[bool, typer.Option(
        "--version", "-V", is_eager=True, callback=_version,
        help="print the installed version and exit")] = False) -> None:
    pass


@images_app.command("build")
def images_build(
    names: Annotated[list[str] | None, typer.Argument(
        help="images to build (default: what the manifest needs)")] = None,
    all_: Annotated[bool, typer.Option("--all", help="every image under images/")] = False,
    file: Annotated[Path | None, typer.Option(
        "-f", "--file", help="build what this manifest needs (default ./bakeoff.toml, else "
                             "the bundled example's)")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="rebuild without cache")] = False,
    base_image: Annotated[str | None, typer.Option(
        "--base-image", help="a LOCAL image to use as the base instead of bootstrapping")] = None,
) -> None:
    """Bootstrap the base rootfs and build images/ locally; print each image's ID and identity.

    Any other image of images/ is built when a manifest first uses it."""
    wanted = _images_wanted(list(names or []), all_, file)
    engine = Engine()
    with ImageBuildView(err) as view:
        built = images.build(engine, wanted, view, nocache=no_cache, base_ref=base_image)
    for image in built:
        cache = "cache hit" if image.cached else "built"
        out.print(f"{image.name:<10} {image.tag:<26} {image.image_id}  identity "
                  f"{image.identity}  {cache}", markup=False)


def _with_cluster(engine: Engine, manifest: Path | None,
                  report: doctor_mod.Report) -> doctor_mod.Report:
    """This machine's `report`, and the cluster's checks for a Kubernetes manifest."""
    section = _cluster_of(manifest)
    if section is None:
        return report
    images_of = registry.Registered(engine, section.registry)

    def probe_image() -> str:
        tag = catalog.tag_for(cluster.PROBE_IMAGE)
        if images.inspect(engine, tag) is None:
            raise InfraError(f"{tag} is not built here",
                             hint=f"bakeoff-sandbox images build {cluster.PROBE_IMAGE}")
        return images_of(tag)
    return doctor_mod.Report(report.checks + tuple(cluster.checks(
        section, os.environ, state_dir() / "kube", probe_image)))


def _cluster_of(manifest: Path | None) -> KubernetesSection | None:
    """The [kubernetes] table of a manifest whose engine is a cluster, else None."""
    if manifest is None or not manifest.is_file():
        return None
    try:
        parsed = catalog.manifest_at(manifest)
    except RunnerError:
        return None  # doctor's image line says why it cannot be read
    return parsed.kubernetes if parsed.engine == "kubernetes" else None


def _images_wanted(names: list[str], all_: bool, file: Path | None) -> list[str]:
    """The names given, every image (`[]`) for --all, else what the manifest needs."""
    if names and (all_ or file):
        raise typer.BadParameter("name images, or give --all or -f FILE, not both")
    if names or all_:
        return names
    manifest = file or (Path(DEFAULT_MANIFEST) if Path(DEFAULT_MANIFEST).is_file()
                        else demo_mod.examples_dir() / demo_mod.EXAMPLE / DEFAULT_MANIFEST)
    parsed = catalog.manifest_at(manifest)
    wanted = catalog.needed(parsed)
    _say(f"images for {manifest}: {', '.join(wanted)} (--all builds every one; the others "
         "are built on first use)")
    for ref in catalog.not_built_here(parsed):
        _say(f"  not built here: {ref} is not one of the bundled images (a local image of "
             "your own: `docker build -t REF DIR` or `docker load`)")
    return wanted


@app.command()
def doctor(
    file: Annotated[Path | None, typer.Option(
        "-f", "--file", help="check the images this manifest needs (default ./bakeoff.toml "
                             "if present)")] = None,
    fix: Annotated[bool, typer.Option(
        "--fix", help="start an engine if none answers, install Compose, build the missing "
                      "images; then check again")] = False,
) -> None:
    """Check what a bake-off needs here: one line per check, and the command that fixes
    what is not ok. Exit 0 when all are ok, 3 otherwise."""
    manifest, engine = doctor_mod.manifest_path(file), Engine()
    report = _with_cluster(engine, manifest, doctor_mod.diagnose(engine, manifest))
    if fix and not report.ok:
        for line in report.lines():
            _say(line)
        with ImageBuildView(err) as view:
            fixed = doctor_mod.fix(engine, manifest, report, view, _say)
        report = _with_cluster(engine, manifest, fixed)
    for line in report.lines():
        out.print(line, markup=False, soft_wrap=True)
    raise typer.Exit(0 if report.ok else 3)


@app.command()
def schema() -> None:
    """Print the JSON Schema of bakeoff.toml."""
    out.print_json(json.dumps(json_schema()))


@app.command()
def up(
    file: ManifestOpt = Path(DEFAULT_MANIFEST),
    change: Annotated[str | None, typer.Option("--change", help="the change to stage")] = None,
    refreeze: Annotated[bool, typer.Option(
        "--refreeze", help="record a new contract version (the old one is kept)")] = False,
    allow_passing_baseline: Annotated[bool, typer.Option(
        "--allow-passing-baseline", help="proceed although the base passes (a caveat)")] = False,
) -> None:
    """Freeze the contract, preflight, prove the base fails, make one sandbox per arm."""
    loaded = _load(file)
    options = up_mod.UpOptions(refreeze=refreeze,
                                  allow_passing_baseline=allow_passing_baseline)
    made = up_mod.up(_engine(loaded), loaded, change, progress=_say, options=options)
    _say(f"experiment {made.experiment} is up: {len(made.arms)} arms, change {made.change}, "
         f"base {made.base_commit[:12]}, image {made.image_id[:19]}")
    _print_status(loaded, as_json=False)


@app.command()
def status(
    file: ManifestOpt = Path(DEFAULT_MANIFEST),
    as_json: Annotated[bool, typer.Option("--json", help="machine-readable")] = False,
) -> None:
    """One row per arm: sandbox and dispatch state, image, commit, schema, verdicts."""
    _print_status(_load(file), as_json=as_json)


def _print_status(loaded: LoadedManifest, *, as_json: bool) -> None:
    rows = down_mod.status_rows(_engine(loaded, proved=False), loaded)
    if as_json:
        sys.stdout.write(redact(json.dumps(rows, indent=2)) + "\n")
        return
    table = Table("arm", "model", "control", "sandbox", "dispatch", "image", "commit", "schema",
                  "verdicts", box=None)
    for row in rows:
        verdicts = ", ".join(f"{k}={v}" for k, v in row["verdicts"].items()) or "-"
        table.add_row(row["arm"], row["model"], "yes" if row["control"] else "",
                      row["state"], row["dispatch"] or "-", (row["image"] or "-")[:19],
                      (row["commit"] or "-")[:12], row["schema"] or "-", verdicts)
    out.print(table)
    engines = {json.dumps(row["engine"], sort_keys=True) for row in rows if row.get("engine")}
    for found in sorted(engines):
        engine = json.loads(found)
        out.print(f"engine: {engine['host']} ({engine['name']}, ID {engine['id'][:12]})",
                  markup=False)


@app.command("exec", context_settings=EXTRA_ARGS)
def exec_(
    ctx: typer.Context,
    arm: Annotated[str, typer.Argument(help="the arm whose sandbox runs the command")],
    file: ManifestOpt = Path(DEFAULT_MANIFEST),
) -> None:
    """Run a command inside an arm's sandbox: exec ARM -- CMD..."""
    command = [a for a in ctx.args if a != "--"] if ctx.args[:1] == ["--"] else list(ctx.args)
    if not command:
        raise typer.BadParameter("give the command after --, e.g. exec C0 -- git log")
    loaded = _load(file)
    result = down_mod.exec_arm(_engine(loaded, proved=False), loaded, arm, command)
    sys.stdout.write(redact(result.stdout))
    sys.stderr.write(redact(result.stderr))
    if result.timed_out:
        _say(f"timed out after {result.duration_s:.0f}s")
    raise typer.Exit(result.exit_code)


@app.command()
def down(
    file: ManifestOpt = Path(DEFAULT_MANIFEST),
    keep_images: Annotated[bool, typer.Option(
        "--keep-images", help="keep the experiment's prepared images")] = False,
    branches: Annotated[bool, typer.Option(
        "--branches", help="also delete the branches it made (never one checked out, or "
                           "holding commits no record names)")] = False,
) -> None:
    """Remove this experiment's containers, networks, databases and roles (work is kept),
    and its prepared images; list the branches it leaves."""
    loaded = _load(file)
    cleaned = cleanup.down(_engine(loaded, proved=False), loaded, _say, keep_images=keep_images)
    lines = cleanup.image_lines(cleaned.images)
    if branches:
        deleted = cleanup.delete_branches(loaded, cleaned.branches)
        lines += cleanup.deleted_lines(loaded, deleted)
    else:
        lines += cleanup.branch_lines(loaded, cleaned.branches)
    for line in lines:
        _say(line)


@app.command()
def gc(
    file: ManifestOpt = Path(DEFAULT_MANIFEST),
    all_: Annotated[bool, typer.Option("--all", help="every bakeoff-labelled resource")] = False,
    images: Annotated[bool, typer.Option(
        "--images", help="instead: every image of ours no experiment uses")] = False,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="with --images: list, remove nothing")] = False,
) -> None:
    """Remove orphans by label (leftovers of an interrupted `up`; a Kubernetes manifest's
    on its cluster); with --images, the images of ours no experiment uses."""
    if images:
        for line in cleanup.image_lines(cleanup.gc_images(Engine(), dry_run=dry_run)):
            _say(line)
        return
    loaded = None if all_ else _load(file)
    section = None if loaded is None else loaded.manifest.kubernetes
    if section is not None:  # the experiment's objects on its cluster, by label selector
        on = cluster.engine(section, os.environ, state_dir() / "kube")
        removed = down_mod.gc(on, loaded)
        _say(f"gc: removed {removed['container']} containers, {removed['network']} network "
             f"policies, {removed['volume']} volume claims, {removed['service']} services, "
             f"{removed['secret']} secrets at "
             f"{on.address}")
        return
    removed = down_mod.gc(Engine(), loaded)
    _say(f"gc: removed {removed['container']} containers, {removed['network']} networks, "
         f"{removed['volume']} volumes")


@app.command()
def oracle(
    commit: Annotated[str, typer.Option("--commit", help="the commit (any git ref) to score")],
    check: Annotated[str, typer.Option("--check", help="a check name, or `success`")],
    samples: Annotated[int, typer.Option("--samples", min=1, help="fresh containers")] = 3,
    change: Annotated[str | None, typer.Option("--change", help="whose success/protected")] = None,
    file: ManifestOpt = Path(DEFAULT_MANIFEST),
) -> None:
    """Score one commit: N samples, each in a fresh container; print verdicts and pass-rate."""
    loaded = _load(file)
    records, rate, stage = score_mod.oracle(_engine(loaded), loaded, commit, check, samples,
                                          change, _say)
    table = Table("sample", "verdict", "reason", "exit", "passed", "failed", "skipped",
                  "errors", "seconds", box=None)
    for record in records:
        counts = record.counts
        numbers = ["-"] * 4 if counts is None else [
            str(counts.passed), str(counts.failed), str(counts.skipped), str(counts.errors)]
        table.add_row(record.sample, str(record.verdict), record.reason or "",
                      str(record.exit_code), *numbers, f"{record.duration_s:.1f}")
    out.print(table)
    flaky = "  flaky" if rate.flaky else ""
    errors = f"  ({rate.rig_errors} rig errors)" if rate.rig_errors else ""
    out.print(f"pass-rate {rate.text()}{flaky}{errors}", markup=False)
    _say(f"records: {stage}")
    if rate.rig_errors:
        raise typer.Exit(3)


app.command("dispatch")(dispatch_command)
app.command("init")(init_command)
app.command("reproduce", context_settings=EXTRA_ARGS)(reproduce_command)
app.command("rescore")(rescore_command)


@app.command()
def score(
    file: ManifestOpt = Path(DEFAULT_MANIFEST),
    change: Annotated[str | None, typer.Option("--change", help="the change to score")] = None,
    redo_rig_errors: Annotated[bool, typer.Option(
        "--redo-rig-errors", help="run the stored RIG_ERROR samples again (once the rig is "
                                  "fixed); the old attempts are kept under retried/")] = False,
) -> None:
    """Re-score every arm's committed code in fresh containers; write SCORECARD.md."""
    loaded = _load(file)
    chosen = change or state_mod.current_change(loaded)
    arms, card = score_mod.score(_engine(loaded), loaded, chosen, _say,
                                 redo_rig_errors=redo_rig_errors)
    out.print(card.read_text(encoding="utf-8"), markup=False)
    _say(f"scorecard: {card}")
    if any(not arm.valid for arm in arms):
        raise typer.Exit(3)


@app.command("merge")
def merge_(
    file: ManifestOpt = Path(DEFAULT_MANIFEST),
    change: Annotated[str | None, typer.Option("--change", help="the change to merge")] = None,
    base: Annotated[str | None, typer.Option("--base", help="merge this arm, not the top")] = None,
    graft: Annotated[list[str] | None, typer.Option(
        "--graft", help="ARM:PATH or ARM:COMMIT (repeatable)")] = None,
) -> None:
    """Best-of + verified grafts onto the experiment branch."""
    loaded = _load(file)
    chosen = change or state_mod.current_change(loaded)
    record = merge_mod.merge_stage(_engine(loaded), loaded, chosen, _say, base_arm=base,
                                     grafts=list(graft or []))
    out.print(str(record["note"]), markup=False)


@app.command()
def report(file: ManifestOpt = Path(DEFAULT_MANIFEST), open_page: Annotated[bool, typer.Option(
        "--open", help="print REPORT.html's path; open it where a graphical browser exists")]
           = False) -> None:
    """RESULTS.md, OBSERVATION.json and REPORT.html across stages (stored records; no docker)."""
    done = report_mod.report(_load(file))
    out.print(done.results_file.read_text(encoding="utf-8"), markup=False)
    _say(f"report: {done.results_file}, {done.observation_file}, {done.page_file} "
         f"({len(done.observation.rounds)} round(s))")
    if open_page:
        out.print(str(done.page_file), markup=False, soft_wrap=True)
        _say("opened in the browser" if report_mod.open_page(done.page_file) else
             "no graphical browser here: open that file in a browser (it needs no network)")


@app.command("run")
def run_(file: ManifestOpt = Path(DEFAULT_MANIFEST),
         continue_on_rig_error: Annotated[bool, typer.Option(
             "--continue-on-rig-error",
             help="go on past a change whose scoring ended in rig errors (merge what is "
                  "valid, start the next change); every report flags it")] = False) -> None:
    """Every change in order: up, dispatch, score, merge; then report. Resumable. A change
    whose scoring ended in rig errors stops it (exit 3) before its merge."""
    loaded = _load(file)
    _run_loop(loaded, go_on=continue_on_rig_error)


def _run_loop(loaded: LoadedManifest, *, go_on: bool = False) -> None:
    arms = [a.id for a in loaded.manifest.arms]
    with DispatchView(err, arms) as view:
        obs = run_mod.run(_engine(loaded), loaded, _say, view, go_on=go_on)
    directory = layout.experiment_dir(loaded.repo_path, loaded.manifest.experiment.name)
    results = layout.results_file(directory)
    out.print(results.read_text(encoding="utf-8"), markup=False)
    _say(f"artifacts: {layout.report_file(directory)}, {results}, "
         f"{layout.observation_file(directory)} ({len(obs.rounds)} rounds), scorecards in "
         f"{layout.scorecard_file(layout.stage_dir(directory, '*'))}")


@app.command()
def demo(keep: Annotated[Path | None, typer.Option(
        "--keep", help="run in this (new or empty) directory instead of a temporary one")]
         = None,
         example: Annotated[str, typer.Option(
             "--example", help="which bundled example (a folder of examples/): horizon, "
                               "horizon-ui (browser criteria), cachey (a stack)")]
         = demo_mod.EXAMPLE) -> None:
    """A bundled example, end to end (horizon: two changes, five scripted contestants, a
    judge)."""
    manifest = demo_mod.prepare(keep, example)
    _say(f"demo: the example is in {manifest.parent} (a real git repo in repo/)")
    _run_loop(_load(manifest))


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the app; turn our errors into one message and an exit code.

    Every message goes through `err`, which redacts the arms' secrets (runner.cli.terminal)."""
    try:
        # Outside standalone mode, click returns an Exit's code instead of raising it.
        # An image of images/ that a command needs and nobody built is built on first
        # use (images.resolve), shown like `images build` shows it.
        with ImageBuildView(err) as view, reporters.reporting(view):
            code = app(args=argv, standalone_mode=False)
    except (RunnerError, RigError) as error:
        err.print(f"error: {error}", markup=False)
        return error.exit_code
    except typer.Exit as done:
        return int(done.exit_code)
    except ClickException as error:
        error.show(file=RedactedStream(lambda: sys.stderr, SECRETS).as_text_io())
        return 2
    except (typer.Abort, KeyboardInterrupt):
        err.print("aborted", markup=False)
        return 130
    except Exception as error:  # an internal error: one line, the traceback on request
        if os.environ.get("BAKEOFF_DEBUG"):  # through `err` too: a frame may hold a secret
            err.print(traceback.format_exc(), markup=False)
            return 1
        err.print(f"internal error: {type(error).__name__}: {error}\n"
                  "  (set BAKEOFF_DEBUG=1 to see the traceback, and please report it)",
                  markup=False)
        return 1
    return code if isinstance(code, int) else 0
