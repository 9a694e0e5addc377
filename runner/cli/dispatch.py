"""`bakeoff-sandbox dispatch [--arm ID]...`: the typer command (registered in runner.cli).

The live view goes to stderr; a summary table (one row per arm) to stdout. Exit code 3
when any arm hit a rig error (the sandbox or a git step broke: that arm is not a result
and a re-run redoes it), or when no arm's agent started (each exited 126/127: the
commands are wrong); an agent that failed or timed out is a result, exit code 0.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from runner.cli.dispatch_view import DispatchView
from runner.cli.terminal import engine, err, load, out, redact
from runner.commands.dispatch.run import DispatchReport, dispatch
from runner.manifest import DEFAULT_MANIFEST

ManifestOption = Annotated[Path, typer.Option("-f", "--file", help="the manifest")]
ArmOption = Annotated[list[str] | None, typer.Option(
    "--arm", help="dispatch only this arm (repeatable); default: every arm")]


def dispatch_command(file: ManifestOption = Path(DEFAULT_MANIFEST),
                     arm: ArmOption = None) -> None:
    """Run every arm's agent in its own sandbox, in parallel, on the same brief."""
    loaded = load(file)
    arms = list(arm) if arm else [a.id for a in loaded.manifest.arms]
    with DispatchView(err, arms) as view:
        report = dispatch(engine(loaded), loaded, arms, view,
                          say=lambda line: err.print(line, markup=False))
    out.print(summary_table(report))
    err.print(f"dispatch: {len(report.outcomes)} arm(s), change {report.change}, brief sha256 "
              f"{report.brief_sha256[:16]}, {report.wall_s:.1f}s", markup=False)
    if report.rig_errors:
        raise typer.Exit(3)
    report.require_started(loaded.path)


def summary_table(report: DispatchReport) -> Table:
    table = Table("arm", "state", "exit", "seconds", "commit", "diff", "effort", "note",
                  box=None)
    for outcome in report.outcomes:
        r = outcome.record
        diff = "-" if r.files_changed is None else (
            f"{r.files_changed} file{'' if r.files_changed == 1 else 's'} "
            f"+{r.insertions} -{r.deletions}")
        note = "skipped: done earlier" if outcome.skipped else (r.error or "; ".join(r.caveats))
        table.add_row(r.arm, str(r.state), "-" if r.exit_code is None else str(r.exit_code),
                      "-" if r.duration_s is None else f"{r.duration_s:.1f}",
                      (r.commit or "-")[:12], diff,
                      f"{r.effort} ({r.effort_provenance})", redact(note))  # a cell may wrap
    return table
