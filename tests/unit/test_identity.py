"""One `ArmIdentity` (docs/design.md principle 9) serves the manifest arm, the arm record, the
rubric's ArmScore and OBSERVATION.json's arms[]; records and observations written before
it load, and dump, unchanged."""

from __future__ import annotations

import json
from pathlib import Path

from rig.report import ArmEntry, arm_entry, read_observation
from rig.rubric import ArmScore
from runner.commands.dispatch.record import ArmRecord, load_record
from runner.manifest import Arm, ArmIdentity
from tests.unit.test_score import arm_of, scored

STORED = Path(__file__).parent / "stored"  # written by the code before ArmIdentity existed
IDENTITY = ["model", "effort", "effort_normalized", "effort_provenance", "effort_evidence",
            "mode", "control"]


def test_the_identity_is_declared_once_and_every_carrier_inherits_it() -> None:
    assert list(ArmIdentity.model_fields) == IDENTITY
    for carrier in (Arm, ArmRecord, ArmEntry):
        assert issubclass(carrier, ArmIdentity)
        assert not set(IDENTITY) & set(carrier.__annotations__), carrier.__name__
    assert ArmScore.__annotations__["identity"] == "ArmIdentity"
    assert not set(IDENTITY) & set(ArmScore.__annotations__)


def test_manifest_arm_keys_are_the_id_then_the_identity_then_how_it_runs() -> None:
    assert list(Arm.model_fields) == ["id", *IDENTITY, "agent", "command", "agent_version",
                                      "cli", "secrets", "network", "allow_models", "upstream",
                                      "allow_server_tools", "commit_ignored", "effort_probe"]


def test_the_score_and_the_observation_carry_the_manifest_arms_identity() -> None:
    arm = arm_of("A", effort="unknown", control=True)
    score = scored("A", "PPP", effort="unknown", control=True)
    assert score.identity == arm.identity()
    assert type(score.identity) is ArmIdentity  # the identity alone, not the whole arm
    entry = arm_entry(score)
    assert {key: getattr(entry, key) for key in IDENTITY} == dict(arm.identity())
    assert entry.label == arm.label == "model-A @ unknown / single_agent"


def test_an_arm_record_written_before_the_identity_model_loads_and_dumps_byte_identical(
        ) -> None:
    path = STORED / "arm-record-v1.json"
    record = load_record(path)
    assert record is not None
    assert (record.arm, record.model, record.effort_normalized, record.control) == (
        "fixer", "scripted-fixer", "none", False)
    # Issues 13 and 14 added keys, with their defaults; every old key keeps its value and
    # place.
    added = {"model_observed": None, "agent_cli": None, "gateway": None, "marks": [],
             "stack": None}
    dumped = json.loads(record.model_dump_json())
    assert {key: dumped.pop(key) for key in added} == added
    old = json.loads(path.read_text(encoding="utf-8"))
    assert list(dumped.items()) == list(old.items())


def test_an_observation_written_before_the_identity_model_and_ties_loads_unchanged() -> None:
    """Its arms[] keep their keys and key order; the only new key is each round's optional
    tie_break, null in an old artifact (its units round had an arm-id tie-break)."""
    path = STORED / "observation-v2.json"
    old = json.loads(path.read_text(encoding="utf-8"))
    obs = read_observation(path)
    assert [r.tie_break for r in obs.rounds] == [None, None]
    assert [r.winner for r in obs.rounds] == ["fix", "fix"]  # as recorded: never re-decided
    again = json.loads(obs.dump())
    for round_ in again["rounds"]:
        assert round_.pop("tie_break") is None
    assert again == old
    assert [list(a) for a in again["rounds"][0]["arms"]] == [
        list(a) for a in old["rounds"][0]["arms"]]
    assert list(old["rounds"][0]["arms"][0])[:9] == ["arm", *IDENTITY, "commit"]
