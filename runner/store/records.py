"""The typed files of a stage: `stage.json` (what `up` proved) and `merge.json` (what
`merge` did). Written and read only here, through `write_model` / `read_model`, at the
paths `runner.store.layout` gives; the JSON keys are the ones every earlier version
wrote, so a run directory already on disk still reads.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
)

from rig import graft as graft_mod
from rig import ratchet
from rig.sample.verdict import Verdict
from runner.errors import BadInputError
from runner.store import layout
from runner.store.files import read_model, write_model

M = TypeVar("M", bound=BaseModel)


class RecordError(BadInputError):
    """A file of the run directory does not read as its record (exit 2)."""

    def __init__(self, path: Path, what: str, error: ValidationError) -> None:
        self.path = path
        first = error.errors()[0] if error.errors() else {"loc": (), "msg": str(error)}
        where = ".".join(str(part) for part in first["loc"]) or "the file"
        super().__init__(
            f"{path} is not a valid {what}: {where}: {first['msg']}",
            hint="it was edited by hand or written by another version: restore it, or "
                 "remove the stage's directory and run the stage again")


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


# -- stage.json ---------------------------------------------------------------------


class BaselineProof(_Record):
    """The success criterion on the untouched base: it must fail (principle 2)."""

    pass_rate: float
    verdicts: list[Verdict]


class ReferenceProof(_Record):
    """The success criterion on the reference: it must pass (principle 7)."""

    commit: str
    pass_rate: float


class RatchetBase(_Record):
    """A ratchet's base value for the stage and where it came from."""

    value: float
    source: str


class StageRecord(_Record):
    """`stage.json`: the proofs `up` made before it froze the stage's contract."""

    change: str
    base_commit: str
    contract_version: int
    contract_sha256: str
    baseline: BaselineProof
    reference: ReferenceProof | None
    caveats: list[str]
    ratchets: dict[str, RatchetBase] = {}  # absent in a stage.json written before ratchets


# -- merge.json ---------------------------------------------------------------------


class LostTest(_Record):
    """A test that passed in every sample before a graft and not in every one after."""

    id: str
    after: list[str]  # how it came out where it did not pass: failed, skipped, absent, ...


class IdsFound(_Record):
    """What a graft's re-verification found by test id, for one check (`rig.graft.ById`)."""

    compared: int  # ids that passed in every sample before the graft
    lost: list[LostTest] = []  # the first `rig.graft.LOST_KEPT` of them
    lost_count: int = 0
    note: str = ""  # why nothing was compared by id (an exit-code check: rates only)
    passed_before: int | None = None  # the fewest tests that passed in a sample before
    passed_after: int | None = None   # ... and after (None: the parser counts none)

    @classmethod
    def of(cls, found: graft_mod.ById) -> IdsFound:
        before, after = found.passed or (None, None)
        return cls(compared=found.compared, lost_count=found.lost_count, note=found.note,
                   lost=[LostTest(id=lost.id, after=list(lost.after)) for lost in found.lost],
                   passed_before=before, passed_after=after)


class GraftResult(_Record):
    """A change of another arm applied onto the winner, re-verified, kept or dropped;
    `by_id`: per check, what the re-verification found by test id (absent in a
    merge.json written before it)."""

    arm: str = Field(validation_alias="from", serialization_alias="from")
    what: str
    rationale: str
    verified: bool
    kept: bool
    why: str
    by_id: dict[str, IdsFound] = {}

    @model_serializer(mode="wrap")
    def _no_empty_ids(self, handler: SerializerFunctionWrapHandler,
                      info: SerializationInfo) -> dict[str, object]:
        data: dict[str, object] = handler(self)
        if not self.by_id:
            data.pop("by_id", None)
        return data

    def as_dict(self) -> dict[str, object]:
        """As merge.json and the scorecard spell it (`from`, not `arm`)."""
        return self.model_dump(mode="json", by_alias=True)


class Withheld(_Record):
    """Harness files of one arm a merge did not put on the branch, and why (a graft is
    never harness; the winner is merged as it was measured: under the base's harness)."""

    arm: str = Field(validation_alias="from", serialization_alias="from")
    paths: list[str]  # in escaped form (`rig.sample.tree.shown`), the first `WITHHELD_KEPT`
    count: int
    why: str


WITHHELD_KEPT = 50


class RatchetMove(_Record):
    """What a merge did to one ratchet's baseline for the next change (`rig.ratchet.move`)."""

    before: float = Field(validation_alias="from", serialization_alias="from")
    after: float = Field(validation_alias="to", serialization_alias="to")
    measured: float | None
    moved: bool
    why: str

    @classmethod
    def of(cls, movement: ratchet.Movement) -> RatchetMove:
        return cls(before=movement.before, after=movement.after, measured=movement.measured,
                   moved=movement.moved, why=movement.why)


class MergeRecord(_Record):
    """`merge.json`: the winner, the head it left the branch at, the grafts, the harness
    files withheld from the branch, and each ratchet's baseline for the next change (no
    `ratchets` key without ratchets, no `withheld` key when nothing was withheld)."""

    change: str
    winner: str | None
    head: str
    note: str
    grafts: list[GraftResult]
    ratchets: dict[str, RatchetMove] = {}
    withheld: list[Withheld] = []

    @model_serializer(mode="wrap")
    def _no_empty_ratchets(self, handler: SerializerFunctionWrapHandler,
                           info: SerializationInfo) -> dict[str, object]:
        data: dict[str, object] = handler(self)
        if not self.ratchets:
            data.pop("ratchets", None)
        if not self.withheld:
            data.pop("withheld", None)
        return data


# -- rescore/<stamp>/rescore.json -------------------------------------------------------


class RescoredSide(_Record):
    """One sample as recorded, or as re-scored."""

    verdict: str
    reason: str | None
    counts: dict[str, int] | None
    exit_code: int | None
    image: str
    image_id: str


class RescoredSample(_Record):
    sample: str
    old: RescoredSide
    new: RescoredSide
    changed: bool
    same_image: bool
    attribution: str | None


class RescoreRecord(_Record):
    """What `rescore` found for a stage: every sample, recorded against re-scored."""

    change: str
    rebuild: bool
    directory: str  # the rescore's folder name (its stamp)
    samples: list[RescoredSample]


# -- tools/<key>.json ----------------------------------------------------------------------


class ImageFact(_Record):
    """One answer about an image (`runner.containers.images.facts`), kept per image ID."""

    image_id: str
    tools: list[str]  # what was asked about (empty for the writable / site questions)
    missing: list[str] | None = None
    writable: list[str] | None = None
    site: list[str] | None = None
    modules: list[str] | None = None  # the top-level modules the image's python imports


# -- reading and writing ------------------------------------------------------------------


def _read(path: Path, model: type[M], what: str) -> M | None:
    try:
        return read_model(path, model)
    except ValidationError as error:
        raise RecordError(path, what, error) from error


def load_stage(stage: Path) -> StageRecord | None:
    """The stage's proofs, None before `up` proved it; `RecordError` if it does not read."""
    return _read(layout.stage_file(stage), StageRecord, "stage record (stage.json)")


def save_stage(stage: Path, record: StageRecord) -> None:
    write_model(layout.stage_file(stage), record)


def load_merge(stage: Path) -> MergeRecord | None:
    """The stage's merge, None before it was merged; `RecordError` if it does not read."""
    return _read(layout.merge_file(stage), MergeRecord, "merge record (merge.json)")


def save_merge(stage: Path, record: MergeRecord) -> None:
    write_model(layout.merge_file(stage), record)


def load_rescore(path: Path) -> RescoreRecord | None:
    return _read(path, RescoreRecord, "rescore record (rescore.json)")


def save_rescore(path: Path, record: RescoreRecord) -> None:
    write_model(path, record)


def load_fact(path: Path) -> ImageFact | None:
    return _read(path, ImageFact, "image fact (tools/*.json)")


def save_fact(path: Path, record: ImageFact) -> None:
    write_model(path, record)


def merged(stage: Path) -> bool:
    """Whether the stage has a merge record (without reading it)."""
    return layout.merge_file(stage).exists()
