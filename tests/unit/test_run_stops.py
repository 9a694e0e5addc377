"""`run` never goes on past a round of rig errors (issue 31): it stops with exit 3 before
that change's merge, naming the samples and the fix, and the next change never starts;
`--continue-on-rig-error` goes on and the stage records it, so every report flags it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from rig import standings
from runner.commands import run as run_mod
from runner.errors import RigErrorRoundError
from runner.store import layout


@pytest.fixture
def steps(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """`run_change`'s steps, each replaced by a line in the returned list; `score` says
    arm B's second success sample was a rig error on change `first` only."""
    done: list[str] = []

    def score(engine: Any, loaded: Any, change: str, say: Any, toolchain: Any) -> Any:
        done.append(f"score {change}")
        errors = [("first/B/success/2", "infra")] if change == "first" else []
        return [SimpleNamespace(rig_errors=[]), SimpleNamespace(rig_errors=errors)], None

    monkeypatch.setattr(run_mod.merge_mod, "load", lambda loaded, change: None)
    monkeypatch.setattr(run_mod, "dispatched", lambda loaded, change: True)
    monkeypatch.setattr(run_mod.score_mod, "score", score)
    monkeypatch.setattr(run_mod.sample_plan, "stage_path", lambda loaded, change: tmp_path / change)
    monkeypatch.setattr(run_mod.merge_mod, "merge_change",
                        lambda engine, loaded, change, say, toolchain: done.append(
                            f"merge {change}"))
    monkeypatch.setattr(run_mod.down_mod, "down", lambda engine, loaded, say: None)
    return done


LOADED = SimpleNamespace(path=Path("/repo/bakeoff.toml"), repo_path=Path("/repo"),
                         manifest=SimpleNamespace(experiment=SimpleNamespace(name="x")))


def run_both(go_on: bool) -> None:
    for change in ("first", "second"):
        run_mod.run_change(None, LOADED, change, lambda _: None, None, object(),  # type: ignore[arg-type]
                        go_on=go_on)


def test_a_round_of_rig_errors_stops_the_run_before_its_merge(steps: list[str],
                                                               tmp_path: Path) -> None:
    with pytest.raises(RigErrorRoundError) as raised:
        run_both(go_on=False)
    assert steps == ["score first"]  # no merge, and the second change never started
    error = raised.value
    assert error.exit_code == 3 and error.errors == ["first/B/success/2 infra"]
    assert str(error).splitlines()[0] == (
        "first: 1 sample(s) ended in a rig error (first/B/success/2 infra): the round is "
        "not valid, so `run` stops here, before its merge and the next change")
    assert "bakeoff-sandbox score -f /repo/bakeoff.toml --change first --redo-rig-errors" \
        in str(error)
    assert not layout.continued_file(tmp_path / "first").exists()


def test_continue_on_rig_error_goes_on_and_the_stage_says_so(steps: list[str],
                                                             tmp_path: Path) -> None:
    run_both(go_on=True)
    assert steps == ["score first", "merge first", "score second", "merge second"]
    assert layout.continued_file(tmp_path / "first").read_text() == \
        '[\n  "first/B/success/2 infra"\n]\n'
    assert not layout.continued_file(tmp_path / "second").exists()


def test_the_flag_has_a_meaning_every_report_prints() -> None:
    assert standings.describe_flag("continued_past_rig_errors").startswith(
        "continued_past_rig_errors: `run --continue-on-rig-error` went on past this round's "
        "rig errors")
