"""A browser criterion's `expect_requests` entry, read: `METHOD /path [STATUS]`.

The manifest checks each entry as it loads (`runner.manifest.criteria.Success`) and the rig
decides it against what the browser saw (`rig.guards.real_path`): one reading, here,
where both may import it (rig imports the manifest's models, never the other way round).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_EXPECTATION = re.compile(
    r"(?P<method>[A-Z]{1,16}) (?P<path>/[!-~]*?)(?: (?P<status>[1-5](?:\d\d|xx)))?")



class ExpectationError(ValueError):
    """An `expect_requests` entry that does not read as `METHOD /path [STATUS]`."""


@dataclass(frozen=True)
class Expectation:
    """`METHOD /path [STATUS]`: a status is exact (`400`) or a class (`4xx`); 2xx if none."""

    method: str
    path: str
    status: str = "2xx"

    def __str__(self) -> str:
        return f"{self.method} {self.path} {self.status}"

    def accepts(self, status: int | None) -> bool:
        if status is None:
            return False
        if self.status.endswith("xx"):
            return status // 100 == int(self.status[0])
        return status == int(self.status)


def parse_expectation(text: str) -> Expectation:
    """`POST /api/horizon` -> Expectation("POST", "/api/horizon", "2xx")."""
    found = _EXPECTATION.fullmatch(text.strip())
    if found is None:
        raise ExpectationError(
            f"{text!r} is not METHOD /path [STATUS]: write e.g. \"POST /api/horizon\" "
            "(a 2xx answer from the app's server) or \"POST /api/horizon 400\"")
    return Expectation(found["method"], found["path"], found["status"] or "2xx")
