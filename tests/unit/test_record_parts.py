"""The sample record's parts (issue 22): each fact declared once, in the part that says
where it comes from; records written flat by an earlier version still load."""

from __future__ import annotations

import json
from pathlib import Path

from rig.sample.record import PARTS, SCHEMA, Asked, BrowserAsked, Graded, Ran, SampleRecord

STORED = Path(__file__).parent / "stored"  # written flat (v1) by commit 8003889


def test_every_fact_of_a_record_is_in_exactly_one_part() -> None:
    fields = set(SampleRecord.model_fields) - {"schema_version"}
    parts = [set(model.model_fields) for model in PARTS.values()]
    assert set().union(*parts) == fields
    assert sum(len(p) for p in parts) == len(fields)  # no fact in two parts


def test_a_flat_record_of_an_earlier_version_loads_and_is_written_in_parts() -> None:
    flat = json.loads((STORED / "sample-record-v1.json").read_text())
    record = SampleRecord.model_validate(flat)
    assert (record.schema_version, record.sample, record.verdict, record.build_exit) == (
        "bakeoff-sample/v1", "decode-params/fixer/success/1", "PASS", 0)
    written = json.loads(record.model_dump_json())
    assert list(written) == ["schema_version", "asked", "ran", "graded"]
    assert written["asked"]["command"] == flat["command"] == "npx vitest run test/decode.test.ts"
    assert written["ran"]["image_id"] == flat["image_id"]
    assert written["graded"]["tests"] == flat["tests"]
    for name, model in PARTS.items():
        assert set(written[name]) == set(model.model_fields)
    again = SampleRecord.model_validate_json(record.model_dump_json())
    assert again.schema_version == SCHEMA
    assert again == record.model_copy(update={"schema_version": SCHEMA})
    assert {k: getattr(again, k) for k in flat if k != "schema_version"} == {
        k: getattr(record, k) for k in flat if k != "schema_version"}


def test_a_part_is_its_own_model_and_a_new_kind_adds_its_facts_there() -> None:
    record = SampleRecord.model_validate(json.loads(
        (STORED / "sample-record-v1.json").read_text())).model_copy(update={
            "browser": BrowserAsked(file="/m/ui/test_cap.py", sha256="ab" * 32,
                                    expect_requests=["POST /api/horizon"])})
    asked = record.part("asked")
    assert isinstance(asked, Asked) and asked.browser == record.browser
    assert isinstance(record.part("ran"), Ran) and isinstance(record.part("graded"), Graded)
    written = json.loads(record.model_dump_json())
    assert written["asked"]["browser"] == {"file": "/m/ui/test_cap.py", "sha256": "ab" * 32,
                                           "expect_requests": ["POST /api/horizon"]}
    assert SampleRecord.model_validate(written).browser == record.browser
    assert written["schema_version"] == SCHEMA == "bakeoff-sample/v2"
