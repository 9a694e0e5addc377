"""The WebAuthn helpers, against published vectors and hand-built inputs."""

import hashlib

import pytest

from horizonui import webauthn

# RFC 6979, A.2.5: ECDSA, P-256, SHA-256, message "sample".
RFC_KEY = (0x60FED4BA255A9D31C961EB74C6356D68C049B8923B61FA6CE669622E60F29FB6,
           0x7903FE1008B8BC99A41AE9E95628BC64F2F1B20C2D7E9F5177A3C294D4462299)
RFC_R = 0xEFD48B2AACB6A8FD1140DD9CD45E81D69D2C877B56AAF991C34D0EA84EAF3716
RFC_S = 0xF7CB1C942D657C41D436C7A1B6E29F65F3E900DBB9AFF4064DC4AB2F843ACDA8


def der(r, s):
    def integer(v):
        raw = v.to_bytes((v.bit_length() + 8) // 8, "big")
        return bytes([0x02, len(raw)]) + raw
    body = integer(r) + integer(s)
    return bytes([0x30, len(body)]) + body


def test_a_published_signature_verifies():
    assert webauthn.der_signature(der(RFC_R, RFC_S)) == (RFC_R, RFC_S)
    assert webauthn.verify_es256(RFC_KEY, b"sample", der(RFC_R, RFC_S))


@pytest.mark.parametrize(("message", "signature"), [
    (b"samplf", der(RFC_R, RFC_S)), (b"sample", der(RFC_R, RFC_S + 1)),
    (b"sample", der(RFC_S, RFC_R)), (b"sample", b"\x30\x02\x02\x00"), (b"sample", b"")])
def test_anything_else_does_not(message, signature):
    assert not webauthn.verify_es256(RFC_KEY, message, signature)


def test_a_point_off_the_curve_is_no_key():
    assert not webauthn.verify_es256((RFC_KEY[0], RFC_KEY[1] + 1), b"sample",
                                     der(RFC_R, RFC_S))


def test_cbor_of_an_attestation_object_and_its_cose_key():
    x, y = RFC_KEY[0].to_bytes(32, "big"), RFC_KEY[1].to_bytes(32, "big")
    cose = (b"\xa5\x01\x02\x03\x26\x20\x01\x21\x58\x20" + x + b"\x22\x58\x20" + y)
    credential = b"\x11" * 16
    data = (hashlib.sha256(b"localhost").digest() + bytes([0x45]) + (7).to_bytes(4, "big")
            + b"\x00" * 16 + len(credential).to_bytes(2, "big") + credential + cose)
    attestation = (b"\xa3\x63fmt\x64none\x67attStmt\xa0\x68authData\x59"
                   + len(data).to_bytes(2, "big") + data)
    decoded, end = webauthn.cbor(attestation)
    assert end == len(attestation) and decoded["fmt"] == "none" and decoded["attStmt"] == {}
    parsed = webauthn.auth_data(decoded["authData"])
    assert (parsed.rp_id_hash, parsed.flags, parsed.sign_count, parsed.credential_id) == (
        hashlib.sha256(b"localhost").digest(), 0x45, 7, credential)
    assert webauthn.cose_p256(parsed.public_key) == RFC_KEY


def test_base64url_round_trips_without_padding():
    assert webauthn.b64url(b"\xfb\xff") == "-_8"
    assert webauthn.unb64url("-_8") == b"\xfb\xff"
