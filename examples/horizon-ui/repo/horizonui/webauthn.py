"""What a WebAuthn (passkey) server needs, with the standard library only.

- `b64url` / `unb64url`: base64url without padding, as WebAuthn writes it;
- `cbor`: a decoder of the CBOR subset authenticators send (attestation objects, COSE keys);
- `AuthData` / `auth_data`: authenticator data (rpIdHash, flags, sign count, and the
  attested credential of a registration);
- `cose_p256`: a COSE EC2 key (ES256, P-256) as its affine point;
- `verify_es256`: an ECDSA P-256 / SHA-256 signature (DER) over a message, pure Python
  (checked against RFC 6979 A.2.5 in tests/test_webauthn.py).

It decides nothing by itself: the endpoints say what must be checked (type, challenge,
origin, rpIdHash, flags, signature, sign count).
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from typing import Any

FLAG_UP, FLAG_UV, FLAG_AT = 0x01, 0x04, 0x40


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class CborError(ValueError):
    """Bytes that are not the CBOR an authenticator sends."""


def cbor(data: bytes, offset: int = 0) -> tuple[Any, int]:
    """One CBOR item at `offset`: (value, the offset after it)."""
    if offset >= len(data):
        raise CborError("truncated")
    major, info = data[offset] >> 5, data[offset] & 0x1F
    offset += 1
    if info < 24:
        arg = info
    elif info in (24, 25, 26, 27):
        size = 1 << (info - 24)
        if offset + size > len(data):
            raise CborError("truncated")
        arg = int.from_bytes(data[offset:offset + size], "big")
        offset += size
    else:
        raise CborError(f"unsupported additional information {info}")
    if major == 0:
        return arg, offset
    if major == 1:
        return -1 - arg, offset
    if major in (2, 3):
        if offset + arg > len(data):
            raise CborError("truncated")
        raw = data[offset:offset + arg]
        return (raw if major == 2 else raw.decode()), offset + arg
    if major == 4:
        items = []
        for _ in range(arg):
            item, offset = cbor(data, offset)
            items.append(item)
        return items, offset
    if major == 5:
        found = {}
        for _ in range(arg):
            key, offset = cbor(data, offset)
            found[key], offset = cbor(data, offset)
        return found, offset
    if major == 7 and arg in (20, 21, 22):
        return {20: False, 21: True, 22: None}[arg], offset
    raise CborError(f"unsupported major type {major}")


@dataclass(frozen=True)
class AuthData:
    rp_id_hash: bytes
    flags: int
    sign_count: int
    credential_id: bytes | None = None
    public_key: dict[int, Any] | None = None


def auth_data(data: bytes) -> AuthData:
    """Authenticator data: 32 bytes rpIdHash, flags, a 4-byte sign count, then (flag AT)
    the AAGUID, the credential id and its COSE public key."""
    if len(data) < 37:
        raise CborError("authenticator data is shorter than 37 bytes")
    rp_id_hash, flags, count = data[:32], data[32], int.from_bytes(data[33:37], "big")
    if not flags & FLAG_AT:
        return AuthData(rp_id_hash, flags, count)
    length = int.from_bytes(data[53:55], "big")
    credential_id = data[55:55 + length]
    key, _ = cbor(data, 55 + length)
    return AuthData(rp_id_hash, flags, count, credential_id, key)


# P-256 (secp256r1)
P = 0xFFFFFFFF00000001000000000000000000000000FFFFFFFFFFFFFFFFFFFFFFFF
A = P - 3
B = 0x5AC635D8AA3A93E7B3EBBD55769886BC651D06B0CC53B0F63BCE3C3E27D2604B
N = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
G = (0x6B17D1F2E12C4247F8BCE6E563A440F277037D812DEB33A0F4A13945D898C296,
     0x4FE342E2FE1A7F9B8EE7EB4A7C0F9E162BCE33576B315ECECBB6406837BF51F5)
Point = tuple[int, int] | None


def cose_p256(key: dict[int, Any]) -> tuple[int, int]:
    """A COSE EC2 key (kty 2, alg -7 ES256, crv 1 P-256) as (x, y) on the curve."""
    if (key.get(1), key.get(3), key.get(-1)) != (2, -7, 1):
        raise CborError("not an ES256 P-256 COSE key")
    x, y = int.from_bytes(key[-2], "big"), int.from_bytes(key[-3], "big")
    if not on_curve((x, y)):
        raise CborError("the key is not a point of P-256")
    return x, y


def on_curve(point: tuple[int, int]) -> bool:
    x, y = point
    return 0 <= x < P and 0 <= y < P and (y * y - x * x * x - A * x - B) % P == 0


def _add(p: Point, q: Point) -> Point:
    if p is None:
        return q
    if q is None:
        return p
    if p[0] == q[0] and (p[1] + q[1]) % P == 0:
        return None
    if p == q:
        slope = (3 * p[0] * p[0] + A) * pow(2 * p[1], -1, P) % P
    else:
        slope = (q[1] - p[1]) * pow(q[0] - p[0], -1, P) % P
    x = (slope * slope - p[0] - q[0]) % P
    return x, (slope * (p[0] - x) - p[1]) % P


def _mul(k: int, point: Point) -> Point:
    result: Point = None
    while k:
        if k & 1:
            result = _add(result, point)
        point = _add(point, point)
        k >>= 1
    return result


def der_signature(der: bytes) -> tuple[int, int]:
    """(r, s) of an ASN.1 DER `SEQUENCE { INTEGER r, INTEGER s }`."""
    if len(der) < 8 or der[0] != 0x30 or der[1] != len(der) - 2:
        raise CborError("not a DER ECDSA signature")
    values, offset = [], 2
    for _ in range(2):
        if der[offset] != 0x02:
            raise CborError("not a DER ECDSA signature")
        size = der[offset + 1]
        values.append(int.from_bytes(der[offset + 2:offset + 2 + size], "big"))
        offset += 2 + size
    if offset != len(der):
        raise CborError("trailing bytes after the signature")
    return values[0], values[1]


def verify_es256(public_key: tuple[int, int], message: bytes, signature: bytes) -> bool:
    """Whether `signature` (DER) is an ECDSA P-256 signature of SHA-256(`message`)."""
    try:
        r, s = der_signature(signature)
    except (CborError, IndexError):
        return False
    if not (1 <= r < N and 1 <= s < N) or not on_curve(public_key):
        return False
    e = int.from_bytes(hashlib.sha256(message).digest(), "big")
    w = pow(s, -1, N)
    point = _add(_mul(e * w % N, G), _mul(r * w % N, public_key))
    return point is not None and point[0] % N == r
