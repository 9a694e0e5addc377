"""Passkeys (WebAuthn): registration and sign-in, verified on the server.

Each ceremony's challenge is issued by the server, kept for one use, and checked in the
client data with the type and the origin; the authenticator data's rpIdHash and flags
(user present, user verified) are checked; at sign-in the signature over
authenticatorData || SHA-256(clientDataJSON) is verified with the key stored at
registration, and the sign count must move forward."""

from __future__ import annotations

import hashlib
import json
import secrets
import threading
from typing import Any

from horizonui import db, webauthn

Answer = tuple[int, dict[str, Any]]
REFUSED: Answer = (401, {"error": "refused"})
_CHALLENGES: dict[tuple[str, str], bytes] = {}
_LOCK = threading.Lock()


def _rp_id(host: str) -> str:
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _user(body: dict[str, Any]) -> str:
    user = body.get("username")
    if not isinstance(user, str) or not 1 <= len(user) <= 64:
        raise ValueError("username")
    return user


def _issue(kind: str, user: str) -> str:
    challenge = secrets.token_bytes(32)
    with _LOCK:
        _CHALLENGES[(kind, user)] = challenge
    return webauthn.b64url(challenge)


def _client_data(body: dict[str, Any], kind: str, user: str, host: str) -> bytes | None:
    """The client data's bytes when its type, challenge (used once) and origin are ours."""
    raw = webauthn.unb64url(body["client_data_json"])
    data = json.loads(raw)
    with _LOCK:
        expected = _CHALLENGES.pop((kind, user), None)
    ceremony = "webauthn.create" if kind == "register" else "webauthn.get"
    if expected is None or data.get("type") != ceremony or data.get(
            "challenge") != webauthn.b64url(expected) or data.get("origin") != f"http://{host}":
        return None
    return raw


def _authentic(auth: webauthn.AuthData, host: str) -> bool:
    wanted = webauthn.FLAG_UP | webauthn.FLAG_UV
    return (auth.rp_id_hash == hashlib.sha256(_rp_id(host).encode()).digest()
            and auth.flags & wanted == wanted)


def _checked(handler):  # malformed input is a bad request, never a 500
    def run(body: dict[str, Any], host: str) -> Answer:
        try:
            return handler(body, host)
        except (KeyError, TypeError, ValueError, webauthn.CborError):
            return 400, {"error": "bad_request"}
    return run


@_checked
def register_begin(body: dict[str, Any], host: str) -> Answer:
    user = _user(body)
    return 200, {"challenge": _issue("register", user), "rp_id": _rp_id(host),
                 "user_id": webauthn.b64url(secrets.token_bytes(16))}


@_checked
def register_finish(body: dict[str, Any], host: str) -> Answer:
    user = _user(body)
    if _client_data(body, "register", user, host) is None:
        return REFUSED
    attestation, _ = webauthn.cbor(webauthn.unb64url(body["attestation_object"]))
    auth = webauthn.auth_data(attestation["authData"])
    if not _authentic(auth, host) or auth.credential_id is None or auth.public_key is None:
        return REFUSED
    x, y = webauthn.cose_p256(auth.public_key)
    db.save_passkey(webauthn.b64url(auth.credential_id), user, f"{x:x}", f"{y:x}",
                    auth.sign_count)
    return 200, {"user": user}


@_checked
def login_begin(body: dict[str, Any], host: str) -> Answer:
    user = _user(body)
    keys = db.passkeys_of(user)
    if not keys:
        return REFUSED
    return 200, {"challenge": _issue("login", user), "rp_id": _rp_id(host),
                 "credential_ids": [key["credential_id"] for key in keys]}


@_checked
def login_finish(body: dict[str, Any], host: str) -> Answer:
    user = _user(body)
    client_data = _client_data(body, "login", user, host)
    key = next((k for k in db.passkeys_of(user)
                if k["credential_id"] == body["credential_id"]), None)
    if client_data is None or key is None:
        return REFUSED
    data = webauthn.unb64url(body["authenticator_data"])
    auth = webauthn.auth_data(data)
    if not _authentic(auth, host):
        return REFUSED
    signed = data + hashlib.sha256(client_data).digest()
    if not webauthn.verify_es256((int(key["x"], 16), int(key["y"], 16)), signed,
                                 webauthn.unb64url(body["signature"])):
        return REFUSED
    if (auth.sign_count or key["sign_count"]) and auth.sign_count <= key["sign_count"]:
        return REFUSED
    db.set_sign_count(key["credential_id"], auth.sign_count)
    return 200, {"user": user}
