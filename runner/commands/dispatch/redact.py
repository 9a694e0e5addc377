"""Secrets never reach a file we write or a line we print: every value becomes `***`.

`Redactor` rewrites whole texts (records, error messages); `StreamRedactor` rewrites a log
as it streams, holding back just enough of the tail that a secret split across two chunks
is still caught. Each secret is matched in every form a program is likely to print it in:

- raw and JSON-escaped (a record is JSON);
- URL-encoded: `quote`, `quote_plus`, `quote(safe="")`, each with upper- and lower-case hex;
- base64, standard and URL-safe alphabets: the whole encoding with and without padding,
  and the secret embedded at any byte offset of a longer encoded text (HTTP Basic auth
  encodes `user:secret`): for each of the three offsets modulo 3, the run of characters
  that encodes secret bits only, whatever the neighbouring bytes are.
"""

from __future__ import annotations

import base64
import codecs
import json
import re
import urllib.parse
from collections.abc import Callable, Iterable

MASK = "***"

# Base64 forms are matched only for secrets of at least this many bytes. An embedded
# secret of n bytes leaves between 4n/3 - 2 and 4n/3 characters that depend on it alone:
# for 8 bytes that is at least 10 characters (60 bits). Ordinary text contains a given
# 10-character run of mixed-case letters and digits by chance about once in 2**60
# positions: never. For a 3-byte secret the run is 2-4 characters ("YW", "Zm9"), which
# ordinary words, ids and hashes contain all the time: masking them would garble logs
# and reveal, by where the masks fall, which short strings the secret encodes to.
BASE64_MIN_BYTES = 8

_ENCODERS: tuple[Callable[[bytes], bytes], ...] = (base64.b64encode, base64.urlsafe_b64encode)
_HEX = re.compile(r"%[0-9A-F]{2}")


class Redactor:
    """Replaces every occurrence of the given secret values, in every form, with `***`."""

    def __init__(self, values: Iterable[str]) -> None:
        self.values = tuple(sorted({value for value in values if value}))
        forms = {form for value in self.values for form in forms_of(value)}
        # Longest first: at one position the whole padded encoding wins over its fragment.
        self.forms = tuple(sorted(forms, key=lambda f: (-len(f), f)))
        self._pattern = re.compile("|".join(map(re.escape, self.forms))) if forms else None
        # Every proper prefix of a form: the tails a stream must hold back.
        self._prefixes = {form[:size] for form in self.forms for size in range(1, len(form))}
        self._longest = max((len(f) for f in self.forms), default=0)

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
        for size in range(min(len(text), self._longest - 1), 0, -1):
            if text[-size:] in self._prefixes:
                return size
        return 0


def forms_of(value: str) -> set[str]:
    """Every text `value` is matched as (see the module docstring)."""
    found = {value, json.dumps(value)[1:-1], *url_forms(value)}
    if len(value.encode("utf-8")) >= BASE64_MIN_BYTES:
        found |= base64_forms(value)
    return {form for form in found if form}


def url_forms(value: str) -> set[str]:
    """`value` percent-encoded as `quote`, `quote_plus` and `quote(safe="")` write it,
    with upper- and lower-case hex digits."""
    upper = {urllib.parse.quote(value), urllib.parse.quote_plus(value),
             urllib.parse.quote(value, safe=""), urllib.parse.quote_plus(value, safe="")}
    return upper | {_HEX.sub(lambda m: m.group(0).lower(), form) for form in upper}


def base64_forms(value: str) -> set[str]:
    """The whole encoding of `value` (padded and not) and, per byte offset 0-2 inside a
    longer encoded text, the characters that encode `value`'s bits only; both alphabets."""
    data = value.encode("utf-8")
    found: set[str] = set()
    for encode in _ENCODERS:
        whole = encode(data).decode("ascii")
        found |= {whole, whole.rstrip("=")}
        for offset in range(3):
            found.add(embedded(encode, data, offset))
    return found


def embedded(encode: Callable[[bytes], bytes], data: bytes, offset: int) -> str:
    """The characters of `encode(prefix + data + suffix)` that depend on `data` alone, for
    any `prefix` of `offset` bytes (mod 3) and any suffix: character i holds bits
    [6i, 6i + 6), so it is kept when those bits all fall inside `data`."""
    text = encode(bytes(offset) + data).decode("ascii")
    first = -(-8 * offset // 6)  # ceil: the first character with no prefix bits
    end = 8 * (offset + len(data)) // 6  # floor: past the last with no suffix bits
    return text[first:end]


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
