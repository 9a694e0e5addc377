"""Passkeys (WebAuthn): registration and sign-in. Not implemented yet: every endpoint
answers 501. `horizonui.webauthn` has the pieces a server needs."""

from __future__ import annotations

from typing import Any

Answer = tuple[int, dict[str, Any]]


def register_begin(body: dict[str, Any], host: str) -> Answer:
    raise NotImplementedError


def register_finish(body: dict[str, Any], host: str) -> Answer:
    raise NotImplementedError


def login_begin(body: dict[str, Any], host: str) -> Answer:
    raise NotImplementedError


def login_finish(body: dict[str, Any], host: str) -> Answer:
    raise NotImplementedError
