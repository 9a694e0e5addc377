"""Secrets redacted in every form a program prints them in: raw, JSON, URL-encoded, base64
(whole, and embedded at every byte offset of a longer text), whole or streamed in chunks.

Pins the attack of issue 11: a secret printed base64- or URL-encoded was not redacted.
"""

from __future__ import annotations

import base64
import urllib.parse
from collections.abc import Callable

import pytest

from runner.commands.dispatch.redact import (
    BASE64_MIN_BYTES,
    MASK,
    Redactor,
    StreamRedactor,
    forms_of,
)

# Chosen so that every encoding differs: '>' and '?' make '+' and '/' in standard base64
# ('-' and '_' URL-safe); ' ', '/', '+', '&' and 'é' are escaped differently by each quote.
SECRET = "k3y>?~ +/&é-secret"
ENCODERS: dict[str, Callable[[bytes], bytes]] = {
    "standard": base64.b64encode, "urlsafe": base64.urlsafe_b64encode}


def b64(data: bytes, alphabet: str = "standard") -> str:
    return ENCODERS[alphabet](data).decode("ascii")


FORMS = {
    "base64 padded": b64(SECRET.encode()),
    "base64 unpadded": b64(SECRET.encode()).rstrip("="),
    "base64 url-safe padded": b64(SECRET.encode(), "urlsafe"),
    "base64 url-safe unpadded": b64(SECRET.encode(), "urlsafe").rstrip("="),
    "quote": "k3y%3E%3F~%20%2B/%26%C3%A9-secret",
    "quote_plus": "k3y%3E%3F~+%2B%2F%26%C3%A9-secret",
    "quote safe=''": "k3y%3E%3F~%20%2B%2F%26%C3%A9-secret",
    "quote lower-case hex": "k3y%3e%3f~%20%2b/%26%c3%a9-secret",
    "quote_plus lower-case hex": "k3y%3e%3f~+%2b%2f%26%c3%a9-secret",
    "quote safe='' lower-case hex": "k3y%3e%3f~%20%2b%2f%26%c3%a9-secret",
}


def test_the_forms_are_what_python_writes_and_all_differ() -> None:
    """Guards the fixture: each form is a distinct text, as the stdlib encodes it."""
    data = SECRET.encode()
    assert FORMS["base64 padded"] != FORMS["base64 url-safe padded"]
    assert (FORMS["quote"], FORMS["quote_plus"], FORMS["quote safe=''"]) == (
        urllib.parse.quote(SECRET), urllib.parse.quote_plus(SECRET),
        urllib.parse.quote(SECRET, safe=""))
    assert len(set(FORMS.values())) == len(FORMS) and b64(data) == FORMS["base64 padded"]


@pytest.mark.parametrize("form", FORMS.values(), ids=list(FORMS))
def test_each_encoded_form_of_a_secret_is_redacted(form: str) -> None:
    assert form != SECRET
    assert Redactor([SECRET]).redact(f"token={form}; done") == f"token={MASK}; done"


@pytest.mark.parametrize("alphabet", ENCODERS)
@pytest.mark.parametrize("prefix", [b"", b"u", b"us", b"user:", b"xy:\x00\xff\x10"])
@pytest.mark.parametrize("suffix", [b"", b"!", b":tail"])
def test_a_secret_embedded_at_every_offset_of_a_base64_text_is_redacted(
        alphabet: str, prefix: bytes, suffix: bytes) -> None:
    """What stays around the mask is the encoding of the neighbours, plus at most one
    character each side that mixes their bits with the secret's (2-4 bits, not the secret)."""
    data = SECRET.encode()
    text = b64(prefix + data + suffix, alphabet)
    out = Redactor([SECRET]).redact(text)
    head = -(-8 * len(prefix) // 6)  # characters with any prefix bit
    tail = 8 * (len(prefix) + len(data)) // 6  # the first with any suffix (or padding) bit
    if not suffix and len(prefix) % 3 == 0:  # aligned at the end: the whole form, padding too
        tail = len(text)
    assert out == text[:head] + MASK + text[tail:]
    assert out.count(MASK) == 1


def test_http_basic_auth_of_user_and_secret_is_redacted() -> None:
    header = "Authorization: Basic " + b64(f"user:{SECRET}".encode())
    out = Redactor([SECRET]).redact(header)
    assert out == "Authorization: Basic dXNlcjp" + MASK


def test_a_short_secret_gets_no_base64_forms_and_no_false_positives() -> None:
    """A 3-byte secret's base64 run at offset 1 is 'tle': matching it would mask
    ordinary words. Below BASE64_MIN_BYTES only raw, JSON and URL forms are matched."""
    assert BASE64_MIN_BYTES == 8
    short = Redactor(["key"])
    assert short.redact("a subtle bottle, aGV5 a2V5") == "a subtle bottle, aGV5 a2V5"
    assert short.redact("the key") == f"the {MASK}"
    assert forms_of("7-bytes") == {"7-bytes"}
    eight = forms_of("8-bytes!")
    assert b64(b"8-bytes!") in eight and len(eight) > 3


def test_a_multibyte_secret_is_measured_in_bytes_for_base64() -> None:
    """'ééé' + 'ab' is 5 characters but 8 bytes: its base64 forms are matched."""
    value = "éééab"
    assert Redactor([value]).redact(b64(value.encode())) == MASK


def _stream(redactor: Redactor, chunks: list[bytes]) -> str:
    stream = StreamRedactor(redactor)
    return "".join(stream.feed(chunk) for chunk in chunks) + stream.flush()


def test_every_form_split_across_chunks_at_every_point_is_still_redacted() -> None:
    lines = [f"{name}: {form}" for name, form in FORMS.items()]
    lines.append("Authorization: Basic " + b64(f"user:{SECRET}".encode()))
    lines.append("embedded " + b64(b"xy" + SECRET.encode() + b"!", "urlsafe"))
    data = ("\n".join(lines) + "\n").encode()
    redactor = Redactor([SECRET])
    whole = redactor.redact(data.decode())
    assert whole.count(MASK) == len(lines)
    for cut in range(len(data) + 1):
        assert _stream(redactor, [data[:cut], data[cut:]]) == whole, cut
    for cut in range(0, len(data) + 1, 5):
        for second in range(cut, len(data) + 1, 11):
            out = _stream(redactor, [data[:cut], data[cut:second], data[second:]])
            assert out == whole, (cut, second)


def test_one_byte_at_a_time_every_form_is_redacted() -> None:
    data = " ".join([*FORMS.values(), b64(b"u" + SECRET.encode())]).encode()
    redactor = Redactor([SECRET])
    out = _stream(redactor, [data[i:i + 1] for i in range(len(data))])
    assert out == redactor.redact(data.decode()) == " ".join([MASK] * len(FORMS)) + " dW***Q="
