"""`status` without docker: each arm's dispatch state beside its sandbox state, read from
the arm record of the run that is up (never a record of an earlier `up`)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from runner.cli.app import main
from runner.commands.dispatch.record import RECORD_FILE, ArmState, record_dir, save_record
from runner.commands.dispatch.redact import Redactor
from runner.commands.down import NOT_DISPATCHED, current_record
from runner.manifest import write_init
from runner.store.state import ExperimentState
from tests.unit.test_dispatch_units import record


def _experiment(tmp_path: Path) -> Path:
    write_init(tmp_path)  # the bare template: status reads it, never `up`
    for args in (["init", "-q", "-b", "main"], ["add", "-A"],
                 ["-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-qm", "x"]):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)
    return tmp_path / "bakeoff.toml"


def test_status_of_an_experiment_that_is_down_has_no_dispatch_state(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No run is up, so there is no current run whose record could say anything."""
    manifest = _experiment(tmp_path)
    capsys.readouterr()
    assert main(["status", "--json", "-f", str(manifest)]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["arm"], r["state"], r["dispatch"]) for r in rows] == [
        ("C0", "down", None), ("C1", "down", None)]
    assert list(rows[0])[3:5] == ["state", "dispatch"]
    assert main(["status", "-f", str(manifest)]) == 0
    header, control = capsys.readouterr().out.splitlines()[:2]
    assert header.split() == ["arm", "model", "control", "sandbox", "dispatch", "image",
                              "commit", "schema", "verdicts"]
    assert control.split() == ["C0", "your-control-model", "yes", "down", "-", "-", "-",
                               "-", "-"]


def _state(run: str) -> ExperimentState:
    return ExperimentState(experiment="e", run=run, change="c", phase="up", base_commit="b",
                           image="python", image_id="sha256:1", image_identity="i",
                           limits={})


@pytest.mark.parametrize("state", list(ArmState))
def test_the_dispatch_state_is_the_record_of_the_run_that_is_up(tmp_path: Path,
                                                                 state: ArmState) -> None:
    folder = record_dir(tmp_path, "c", "probe")
    folder.mkdir(parents=True)
    save_record(folder / RECORD_FILE, record(state=state, run="r2"), Redactor([]))
    found = current_record(tmp_path, _state("r2"), "probe")
    assert found is not None and str(found.state) == state.value


def test_a_record_of_an_earlier_up_or_none_at_all_is_not_dispatched(tmp_path: Path) -> None:
    folder = record_dir(tmp_path, "c", "probe")
    assert current_record(tmp_path, _state("r2"), "probe") is None
    folder.mkdir(parents=True)
    save_record(folder / RECORD_FILE, record(state=ArmState.FINISHED, run="r1"), Redactor([]))
    assert current_record(tmp_path, _state("r2"), "probe") is None
    assert NOT_DISPATCHED == "not dispatched"
