"""What REPORT.html shows beyond OBSERVATION.json, as typed values: each sample's record
with the head and tail of its log and its pictures, each arm's dispatch and work (diff,
commit messages), each round's merge and its verification samples.

Pure: the runner reads the files (`runner.commands.evidence`) and hands the bytes in;
everything here only cuts, decodes and checks them. Everything in it may be a
contestant's text: the page autoescapes all of it (`rig.report.page`).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from rig.sample.record import SampleRecord

LOG_HEAD_BYTES: Final = 2 * 1024   # the start of a log the page shows
LOG_TAIL_BYTES: Final = 4 * 1024   # ... and its end
LOG_LINES: Final = (10, 40)         # the head's and the tail's lines shown
PASSED_LOG_LINES: Final = (0, 3)    # ... of a sample that passed: its summary, at the end
PICTURE_CAP_BYTES: Final = 512 * 1024  # one embedded picture; a larger one is named, not shown
PICTURES_PER_SAMPLE: Final = 4
DIFF_LIMIT: Final = 256 * 1024     # one arm's diff on the page; the rest is counted
DIFF_FLOOR: Final = 16 * 1024      # ... however many arms share the page's budget
DIFFS_BUDGET: Final = 8 * 1024 * 1024  # every diff of the page together
MESSAGES_LIMIT: Final = 16 * 1024  # its commit messages
# Picture formats by their first bytes; anything else (an SVG can carry a script) is
# never embedded, whatever its name says.
MAGIC: Final = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"),
                (b"GIF87a", "image/gif"), (b"GIF89a", "image/gif"))
_CONTROL = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
                      r"|[\x00-\x08\x0b-\x1f\x7f]")


def printable(text: str) -> str:
    """`text` without terminal escapes or control characters (tabs and newlines kept)."""
    return _CONTROL.sub("", text.replace("\r\n", "\n"))


def text_of(data: bytes) -> str:
    """Bytes a program printed, as text a page can hold: UTF-8 (bad bytes replaced),
    `printable`."""
    return printable(data.decode("utf-8", errors="replace"))


@dataclass(frozen=True)
class LogExcerpt:
    """The head and tail of a stored log, cut at whole lines; `link`: the whole file,
    relative to REPORT.html."""

    link: str
    size: int
    head: str
    tail: str  # "" when the head holds the whole log
    omitted: int  # bytes of the log in neither


def diff_limit(diffs: int) -> int:
    """The bytes of each diff shown when the page holds `diffs` of them: `DIFF_LIMIT`,
    less when they would together pass `DIFFS_BUDGET`, never under `DIFF_FLOOR`."""
    return max(DIFF_FLOOR, min(DIFF_LIMIT, DIFFS_BUDGET // max(1, diffs)))


def log_excerpt(link: str, size: int, head: bytes, tail: bytes = b"",
                lines: tuple[int, int] = LOG_LINES) -> LogExcerpt:
    """`head`: the log's first bytes, the whole log when `tail` is empty; `tail`: its last
    bytes, read from past the head. The head keeps its first `lines[0]` whole lines, the
    tail its last `lines[1]`; `omitted` counts the bytes of neither."""
    found = head.splitlines(keepends=True)
    if tail and len(found) > 1 and not found[-1].endswith(b"\n"):
        found.pop()  # cut mid-line: the rest of it is not shown
    first = found[:lines[0]]
    last = found[lines[0]:]
    if tail:
        last = tail.splitlines(keepends=True)
        last = last[1:] if len(last) > 1 else last  # it starts mid-line
    last = last[-lines[1]:] if lines[1] else []
    shown = sum(map(len, first)) + sum(map(len, last))
    return LogExcerpt(link, size, text_of(b"".join(first)), text_of(b"".join(last)),
                      max(0, size - shown))


@dataclass(frozen=True)
class Picture:
    """A picture a sample kept (a browser sample's screenshot), as a data: URI the page
    embeds; `uri` None: not embedded, `note` says why."""

    name: str
    uri: str | None
    note: str = ""


def picture(name: str, data: bytes, size: int | None = None,
            cap: int = PICTURE_CAP_BYTES) -> Picture:
    """`data` embedded when it is a PNG, JPEG or GIF of at most `cap` bytes; `size`: the
    file's size when only its start was read."""
    size = len(data) if size is None else size
    if size > cap:
        return Picture(name, None, f"not embedded: {size} bytes, over the {cap}-byte cap")
    kind = next((mime for magic, mime in MAGIC if data.startswith(magic)), None)
    if kind is None:
        return Picture(name, None, "not embedded: not a PNG, JPEG or GIF image")
    return Picture(name, f"data:{kind};base64,{base64.b64encode(data).decode('ascii')}")


@dataclass(frozen=True)
class SampleEvidence:
    """One stored sample: its record, where the record is (relative to REPORT.html), the
    head and tail of its log, its pictures."""

    record: SampleRecord
    link: str
    log: LogExcerpt | None
    pictures: tuple[Picture, ...] = ()


class _Facts(BaseModel):
    """A view of a runner record: only the keys the page shows (the record has more)."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class Dispatch(_Facts):
    """An arm's dispatch, read from its `arm.json`: when it ran, how it ended, what it
    kept, what the wire saw."""

    state: str
    adapter: str
    command: str
    image_id: str
    started_at: str
    finished_at: str | None = None
    duration_s: float | None = None
    exit_code: int | None = None
    timed_out: bool = False
    commit: str | None = None
    commits: int | None = None
    diffstat: str | None = None
    last_line: str = ""
    error: str | None = None
    work_refused: str | None = None
    model_observed: str | None = None
    effort_observed: str | None = None
    caveats: list[str] = []


class WithheldFacts(_Facts):
    """Harness files of one arm the merge kept off the branch (merge.json spells `from`)."""

    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)
    arm: str = Field(alias="from")
    paths: list[str]
    count: int
    why: str


class MergeFacts(_Facts):
    """A round's merge, read from its `merge.json` (the grafts come from OBSERVATION.json)."""

    head: str
    note: str
    withheld: list[WithheldFacts] = []
    ratchets: dict[str, dict[str, object]] = {}


@dataclass(frozen=True)
class Work:
    """An arm's work as the repository holds it: its diff from the base and its commit
    messages, each cut to its limit (`*_omitted`: bytes left out; `whole`: the command that
    shows all of it); `missing`: why there is none (its commit is not in the repository)."""

    diff: str = ""
    diff_omitted: int = 0
    messages: str = ""
    messages_omitted: int = 0
    missing: str = ""
    whole: str = ""


@dataclass(frozen=True)
class ArmEvidence:
    dispatch: Dispatch | None = None
    dispatch_log: LogExcerpt | None = None
    work: Work | None = None


@dataclass(frozen=True)
class RoundEvidence:
    """One round's stored files: each arm's, every sample by name (the arms' and the
    merge's verification runs), and the verification runs by label."""

    arms: Mapping[str, ArmEvidence] = field(default_factory=dict)
    samples: Mapping[str, SampleEvidence] = field(default_factory=dict)
    merge: MergeFacts | None = None
    verification: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    scorecard: str | None = None


@dataclass(frozen=True)
class PageEvidence:
    """Everything the page shows beyond OBSERVATION.json; empty: the page from it alone.
    `reproduce`: the command line that re-creates a sample, without the sample's name."""

    rounds: Mapping[str, RoundEvidence] = field(default_factory=dict)
    reproduce: str = "bakeoff-sandbox reproduce"
    files: Mapping[str, str] = field(default_factory=dict)  # label -> relative link
