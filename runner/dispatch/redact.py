"""Secrets never reach a file we write: every value is replaced by `***`.

`Redactor` rewrites whole texts (records); `StreamRedactor` rewrites a log as it streams,
holding back just enough of the tail that a secret split across two chunks is still
caught. Each secret is matched raw and JSON-escaped (a record is JSON).
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterable

MASK = "***"


class Redactor:
    """Replaces every occurrence of the given secret values with `***`."""

    def __init__(self, values: Iterable[str]) -> None:
        forms = {form for value in values if value for form in _forms(value)}
        self.forms = tuple(sorted(forms, key=len, reverse=True))
        self._pattern = re.compile("|".join(map(re.escape, self.forms))) if forms else None

    def __bool__(self) -> bool:
        return self._pattern is not None

    def redact(self, text: str) -> str:
        return text if self._pattern is None else self._pattern.sub(MASK, text)

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where `redact` would replace, in order (non-overlapping, longest form first)."""
        if self._pattern is None:
            return []
        return [m.span() for m in self._pattern.finditer(text)]

    def held_tail(self, text: str) -> int:
        """The length of the longest suffix of `text` that could start a secret."""
        longest = max((len(f) for f in self.forms), default=0)
        for size in range(min(len(text), longest - 1), 0, -1):
            tail = text[-size:]
            if any(form.startswith(tail) for form in self.forms):
                return size
        return 0


def _forms(value: str) -> set[str]:
    return {value, json.dumps(value)[1:-1]}


class StreamRedactor:
    """Redacts a byte stream chunk by chunk; `feed` returns what is safe to write now."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self.pending = ""
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, data: bytes) -> str:
        text = self.pending + self._decoder.decode(data)
        cut = len(text) - self.redactor.held_tail(text)
        # Never cut through a secret that is complete but straddles the cut.
        for start, end in self.redactor.spans(text):
            if start < cut < end:
                cut = start
        self.pending = text[cut:]
        return self.redactor.redact(text[:cut])

    def flush(self) -> str:
        text = self.pending + self._decoder.decode(b"", final=True)
        self.pending = ""
        return self.redactor.redact(text)
